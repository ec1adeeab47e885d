//! Label values from outside (process and user names, the kubelet's names, the devices' own
//! strings, a stalled read's path) reach `/metrics` without one control character or
//! reordering mark: whoever runs `curl /metrics` in a terminal gets them as `?`.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;

/// The characters a terminal obeys or reorders text by, as the text views hide them.
fn hidden(c: char) -> bool {
    (c.is_control() && c != '\n') || crate::view::printable::is_bidi_control(c)
}

/// Hostile strings in every label taken from outside: an OSC title sequence in a process name
/// (`\x1b]0;pwned\x07`), ESC, NUL, DEL, a C1 control and RIGHT-TO-LEFT OVERRIDE in the user,
/// pod, container and claim names, the device's model and the path a stalled read waits on.
/// Every byte of the exposition is then checked, and the names are there with `?` for them.
#[test]
#[allow(clippy::too_many_lines)] // one sample with every kind of label, then its exposition
fn no_label_carries_a_control_character() {
    use crate::cmd::serve::allocation::KubeSample;
    use crate::kube::{Assignment, Claim, Holder};
    let osc = "\u{1b}]0;pwned\u{7}x";
    let mut s = sample();
    s.devices[0].name = Some("H200\u{1b}[2J".into());
    s.devices[0].pci_bus_id = Some("0000:01:00.0\u{9b}".into());
    s.mig = vec![
        MigGpuInstance::builder()
            .parent_index(0)
            .gpu_instance_id(Some(1))
            .profile(Some("1g\u{202e}.18gb".into()))
            .total_bytes(Some(MIB))
            .build(),
    ];
    s.processes = vec![process(20, Some(osc), 3 * GIB, 0)];
    let mut ctx = alice_in_a_pod();
    ctx.user = Some("ali\u{202e}ce\u{7f}".into());
    if let Some(c) = ctx.container.as_mut() {
        c.namespace = Some("ml\u{1b}".into());
        c.pod = Some("trainer\u{0}-0".into());
        c.name = Some("work\u{202e}er".into());
    }
    s.contexts = [(20, ctx.into())].into_iter().collect();
    let claim = |name: &str| Claim {
        namespace: "ml\u{1b}".into(),
        name: name.into(),
    };
    let held = |name: &str| Holder {
        namespace: "ml\u{1b}".into(),
        pod: "trainer\u{0}-0".into(),
        container: "work\u{202e}er".into(),
        claim: Some(claim(name)),
        mig: None,
    };
    // Laid on directly: the kubelet's names are checked before they get here
    // (`kube::assign`); this is the last guard, for whatever else reaches a label.
    s.kube = Some(KubeSample {
        answer: Ok(Assignment {
            by_gpu: [(
                0,
                vec![held("esc\u{1b}[31m"), held("nul\u{0}"), held("rlo\u{202e}")],
            )]
            .into_iter()
            .collect(),
            booked: [((0, claim("rlo\u{202e}")), GIB)].into_iter().collect(),
            ..Assignment::default()
        }),
        age: Duration::ZERO,
    });
    let stall = Stall {
        ran: Duration::from_secs(60),
        waiting: vec!["/var/run/cdi/\u{1b}]0;x\u{7}.yaml".into()],
    };
    let text = render(s, Duration::ZERO, 1, Some(stall));
    let raw: Vec<(usize, char)> = text.char_indices().filter(|(_, c)| hidden(*c)).collect();
    assert!(raw.is_empty(), "raw controls at {raw:?} in\n{text}");
    assert!(
        text.bytes()
            .all(|b| b == b'\n' || (0x20..0x7f).contains(&b) || b >= 0x80),
        "{text}"
    );
    for want in [
        "process=\"?]0;pwned?x\"",
        "user=\"ali?ce?\"",
        "namespace=\"ml?\",pod=\"trainer?-0\",container=\"work?er\"",
        "claim=\"esc?[31m,nul?,rlo?\"",
        "claim_namespace=\"ml?\",claim=\"rlo?\"} 1073741824",
        "model=\"H200?[2J\"",
        "pci_bus_id=\"0000:01:00.0?\"",
        "profile=\"1g?.18gb\"",
        "on=\"/var/run/cdi/?]0;x?.yaml\"",
    ] {
        assert!(text.contains(want), "{want} not in\n{text}");
    }
}
