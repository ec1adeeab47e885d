//! `hmn top`'s grouped table (`G`): the groups' sums, the filter, the hidden memory's row and
//! the keys its help offers.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use super::*;

/// `G` groups the rows: per pod, the pod's processes' GPU memory and RSS added up, largest
/// first; a process in no pod is `(no pod)`. The filter matches a pod's namespace.
#[test]
fn grouped_by_pod_and_filtered_by_namespace() {
    use crate::top::state::ViewState;
    let in_pod = |uid: &str, names: Option<(&str, &str)>| {
        let mut c = hypomnesis::parse_cgroup(&format!(
            "0::/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{}.scope\n",
            uid.replace('-', "_"),
            "ab".repeat(32)
        ))
        .unwrap();
        if let Some((ns, pod)) = names {
            c.namespace = Some(ns.into());
            c.pod = Some(pod.into());
        }
        c
    };
    let uid_a = "6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d";
    let uid_b = "7b3c6d4e-2f3a-4b6c-9d0e-1f2a3b4c5d6e";
    let mut b = Builder::default();
    let rows = vec![
        row(4242, 0, 40 * GIB, GpuContextKind::Compute, "python3"),
        row(4243, 0, 8 * GIB, GpuContextKind::Compute, "python3"),
        row(5151, 0, 20 * GIB, GpuContextKind::Compute, "python3"),
        row(6060, 0, GIB, GpuContextKind::Compute, "Xorg"),
    ];
    let used = 614 * MIB + 69 * GIB;
    let f = frame(0, vec![(h200(0, 143_771 * MIB - used), rows)]);
    let contexts: BTreeMap<u32, Identity> = [
        (4242, Some(in_pod(uid_a, Some(("ml", "trainer-0"))))),
        (4243, Some(in_pod(uid_a, Some(("ml", "trainer-0"))))),
        (5151, Some(in_pod(uid_b, None))),
        (6060, None),
    ]
    .into_iter()
    .map(|(pid, c)| {
        let mut ctx = ctx("alice", "python3 x.py", GIB, 0);
        ctx.container = c.map(std::sync::Arc::new);
        (pid, ctx)
    })
    .collect();
    let screen = b.screen(&f, |_| contexts.clone(), ram(), &me(0), None);
    let mut state = ViewState::default();
    let key = |c: char| {
        ratatui::crossterm::event::KeyEvent::new(
            ratatui::crossterm::event::KeyCode::Char(c),
            ratatui::crossterm::event::KeyModifiers::SHIFT,
        )
    };
    state.on_key(key('G'), 1);
    assert_eq!(state.group, Some(crate::view::groups::GroupBy::User));
    state.on_key(key('G'), 1);
    assert!(state.wants_containers(), "grouping reads the containers");
    let (text, _) = render(&screen, &state, 100, 20);
    check("grouped-by-pod", &text);
    let lines: Vec<&str> = text.lines().collect();
    let table = lines
        .iter()
        .position(|l| l.starts_with("POD"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        lines[table + 1].starts_with("ml/trainer-0") && lines[table + 1].contains("48.0 GiB"),
        "{text}"
    );
    assert!(lines[table + 2].starts_with(uid_b), "{text}");
    assert!(lines[table + 3].starts_with("(no pod)"), "{text}");
    assert!(lines[0].contains("[by pod]"), "{text}");
    // The filter matches the namespace.
    state.group = None;
    state.filter = "ml".into();
    let shown: Vec<u32> = state.rows(&screen.procs).iter().map(|p| p.pid).collect();
    assert_eq!(shown, [4242, 4243]);
    // Four times more: back to one row per process.
    state.group = Some(crate::view::groups::GroupBy::Pod);
    for _ in 0..3 {
        state.on_key(key('G'), 1);
    }
    assert_eq!(state.group, None);
}

/// The grouped table has a `(not visible from here)` row for the memory no listed process
/// accounts for (as `hmn ps --group-by` has), and its help offers no key that needs a selected
/// process (`k` was offered, then refused).
#[test]
fn the_grouped_table_shows_hidden_memory_and_offers_no_signal() {
    use crate::top::state::ViewState;
    let mut b = Builder::default();
    // 44 GiB listed of 61.4 GiB allocated: 17.4 GiB held by processes not visible here.
    let used = 614 * MIB + 44 * GIB + 17 * GIB + 410 * MIB;
    let f = frame(
        0,
        vec![(
            h200(0, 143_771 * MIB - used),
            vec![row(4242, 0, 44 * GIB, GpuContextKind::Compute, "python3")],
        )],
    );
    let screen = b.screen(
        &f,
        |_| {
            [(4242, ctx("alice", "python3 x.py", GIB, 0))]
                .into_iter()
                .collect()
        },
        ram(),
        &me(0),
        None,
    );
    let mut state = ViewState::default();
    state.on_key(
        ratatui::crossterm::event::KeyEvent::new(
            ratatui::crossterm::event::KeyCode::Char('G'),
            ratatui::crossterm::event::KeyModifiers::SHIFT,
        ),
        1,
    );
    let (text, _) = render(&screen, &state, 100, 20);
    let hidden = text
        .lines()
        .find(|l| l.starts_with("(not visible from here)"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(hidden.contains("17.4 GiB"), "{text}");
    state.help = true;
    let (help, _) = render(&screen, &state, 100, 30);
    assert!(!help.contains("send it TERM"), "{help}");
    assert!(help.contains("none in the grouped table"), "{help}");
    state.group = None;
    let (help, _) = render(&screen, &state, 100, 30);
    assert!(help.contains("send it TERM"), "{help}");
}
