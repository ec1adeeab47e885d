//! The fleet crate's module graph (read by `hypomnesis_testkit::layering`): no module imports
//! another that imports it back; the client and its answers know nothing of fleets, and the
//! fleet nothing of verdicts.

use std::path::Path;

use hypomnesis_testkit::layering::{circles, graph, name};

#[test]
fn no_circles_and_the_client_knows_no_fleet() {
    let edges = graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(edges.len() >= 5, "the modules were found: {edges:?}");
    let found = circles(&edges);
    assert!(
        found.is_empty(),
        "modules that import each other: {:?}",
        found
            .iter()
            .map(|c| c.iter().map(name).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    );
    for (m, to) in &edges {
        let from = m.first().map_or("", String::as_str);
        for t in to {
            let target = t.first().map_or("", String::as_str);
            let below = match from {
                "client" | "answer" | "error" | "selector" => !matches!(target, "fleet" | "fit"),
                "fleet" => target != "fit",
                _ => true,
            };
            assert!(below, "{} reaches up into {}", name(m), name(t));
            // The fleet's parts (its types, the two sources, what they share) import from
            // each other, never from the fleet module that holds them.
            assert!(
                !(from == "fleet" && m.len() > 1 && t.len() == 1 && target == "fleet"),
                "{} imports from {}",
                name(m),
                name(t)
            );
        }
    }
}
