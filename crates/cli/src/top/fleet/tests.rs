//! The fleet view's keys, its refreshes and its frame (drawn on ratatui's test backend).

use std::time::{Duration, Instant};

use hypomnesis_fleet::{Fleet, Node, Nodes, Pod, Process, Source};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::draw::draw;
use super::fetch::{Detail, Snapshot};
use super::view::{Action, Column, View};

const GIB: u64 = 1 << 30;

fn node(name: &str, used_gib: u64, total_gib: u64) -> Node {
    Node {
        name: name.into(),
        target: vec![
            ("job".into(), "hmn".into()),
            ("instance".into(), format!("{name}:10466")),
        ],
        source: Source::Hypomnesis,
        gpus: Some(8),
        total: Some(total_gib * GIB),
        free: Some((total_gib - used_gib) * GIB),
        reserved: Some(GIB / 2),
        ghosts: Some(0),
        largest_pod: None,
        age: Some(3.0),
        stale: false,
        exact: true,
    }
}

fn fleet() -> Vec<Node> {
    let mut stale = node("node-c", 10, 80);
    (stale.stale, stale.age) = (true, Some(192.0));
    let mut dcgm = node("node-d", 30, 80);
    (dcgm.source, dcgm.ghosts) = (Source::Dcgm, None);
    dcgm.largest_pod = Some(Pod {
        namespace: "train".into(),
        pod: "bert-0".into(),
        bytes: None,
    });
    let mut a = node("node-a", 100, 1128);
    a.ghosts = Some(20 * GIB);
    a.largest_pod = Some(Pod {
        namespace: "serve".into(),
        pod: "vllm-0".into(),
        bytes: Some(80 * GIB),
    });
    vec![a, node("node-b", 600, 1128), stale, dcgm]
}

fn snapshot(nodes: Result<Vec<Node>, String>, detail: Option<Detail>) -> Snapshot {
    Snapshot {
        nodes: nodes.map(|nodes| Nodes {
            nodes,
            queries: 6,
            ..Nodes::default()
        }),
        detail,
        at: Instant::now(),
        took: Duration::from_millis(12),
    }
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn names(v: &View) -> Vec<String> {
    v.rows().iter().map(|n| n.name.clone()).collect()
}

fn screen(v: &mut View, width: u16, height: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(width, height)).unwrap();
    t.draw(|f| draw(f, v, Instant::now())).unwrap();
    let buf = t.backend().buffer();
    let mut out = String::new();
    for y in 0..height {
        for x in 0..width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

#[test]
fn rows_sort_filter_and_keep_the_selection_across_refreshes() {
    let mut v = View::new("http://prom:9090", false);
    v.take(snapshot(Ok(fleet()), None));
    // Used, largest first.
    assert_eq!(names(&v), ["node-b", "node-a", "node-d", "node-c"]);
    assert_eq!(v.on_key(key(KeyCode::Char('r'))), Action::Redraw);
    assert_eq!(names(&v), ["node-c", "node-d", "node-a", "node-b"]);
    // Left from USED: GPUS, then NODE (A to Z).
    v.on_key(key(KeyCode::Char('<')));
    v.on_key(key(KeyCode::Left));
    assert_eq!(v.sort, Column::Node);
    assert_eq!(names(&v), ["node-a", "node-b", "node-c", "node-d"]);
    v.on_key(key(KeyCode::Down));
    v.on_key(key(KeyCode::Down));
    assert_eq!(v.selected.as_deref(), Some("node-c"));
    // A refresh keeps the selection on its node.
    v.take(snapshot(Ok(fleet()), None));
    let rows = v.rows();
    assert_eq!(rows[v.selected_index(&rows)].name, "node-c");
    // The filter looks in names, sources and pods.
    v.on_key(key(KeyCode::Char('/')));
    for c in "train".chars() {
        v.on_key(key(KeyCode::Char(c)));
    }
    assert_eq!(names(&v), ["node-d"]);
    v.on_key(key(KeyCode::Enter));
    assert!(!v.editing);
    assert_eq!(v.on_key(key(KeyCode::Esc)), Action::Redraw);
    assert_eq!(names(&v).len(), 4);
    assert_eq!(v.on_key(key(KeyCode::End)), Action::Redraw);
    assert_eq!(v.selected.as_deref(), Some("node-d"));
    assert_eq!(v.on_key(key(KeyCode::Char('q'))), Action::Quit);
}

#[test]
fn enter_opens_the_selected_node_and_esc_goes_back() {
    let mut v = View::new("http://prom:9090", false);
    v.take(snapshot(Ok(fleet()), None));
    let Action::Open(Some(n)) = v.on_key(key(KeyCode::Enter)) else {
        panic!("Enter opens a node");
    };
    assert_eq!(n.name, "node-b");
    // In a node, q still quits, arrows scroll, Esc goes back.
    assert_eq!(v.on_key(key(KeyCode::Down)), Action::Redraw);
    assert_eq!(v.on_key(key(KeyCode::Esc)), Action::Open(None));
    assert!(v.open.is_none());
    assert_eq!(
        v.on_key(KeyEvent::new(KeyCode::Char('z'), KeyModifiers::CONTROL)),
        Action::Suspend
    );
    assert_eq!(
        v.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
        Action::Quit
    );
}

#[test]
fn a_failed_refresh_keeps_the_last_figures_and_says_why() {
    let mut v = View::new("http://prom:9090", false);
    v.take(snapshot(Ok(fleet()), None));
    v.take(snapshot(Err("Prometheus did not answer `up`".into()), None));
    assert_eq!(names(&v).len(), 4);
    let s = screen(&mut v, 150, 10);
    assert!(
        s.contains("refresh failed (last good figures shown): Prometheus did not answer `up`"),
        "{s}"
    );
    v.take(snapshot(Ok(fleet()), None));
    assert!(v.error.is_none());
    // An answer about a node no longer open is not shown.
    let other = node("node-z", 1, 80);
    v.take(snapshot(
        Ok(fleet()),
        Some(Detail {
            node: other,
            read: Ok((Fleet::default(), Vec::new())),
        }),
    ));
    assert!(v.last.as_ref().unwrap().detail.is_none());
}

#[test]
fn the_table_shows_each_node_stale_ones_with_their_age_and_unknowns_as_unknown() {
    let mut v = View::new("http://prom:9090", false);
    assert!(screen(&mut v, 150, 8).contains("asking Prometheus…"));
    v.take(snapshot(Ok(fleet()), None));
    let s = screen(&mut v, 150, 10);
    let title = s.lines().next().unwrap();
    assert!(
        title.contains(
            "3 nodes (1 stale) · 24 GPUs · used 730.0 GiB of 2336.0 GiB · 6 queries took 12ms"
        ),
        "{title}"
    );
    let row = |n: &str| s.lines().find(|l| l.starts_with(n)).unwrap().to_string();
    let a = row("node-a");
    assert!(
        a.contains("100.0 GiB") && a.contains("1128.0 GiB") && a.contains("9%"),
        "{a}"
    );
    assert!(
        a.contains("20.0 GiB") && a.contains("serve/vllm-0 80.0 GiB"),
        "{a}"
    );
    assert!(row("node-c").contains("stale 3m12s"), "{s}");
    // dcgm-exporter says nothing of ghosts, nor what a pod holds.
    let d = row("node-d");
    assert!(d.contains("n/a"), "{d}");
    let after = d.split("train/bert-0").nth(1).unwrap();
    assert_eq!(after.split_whitespace().next(), Some("3s"), "{d}");
    // A narrow terminal: rows are cut, never wrapped.
    let narrow = screen(&mut v, 60, 10);
    assert!(narrow.lines().all(|l| l.chars().count() == 60), "{narrow}");
}

#[test]
fn an_open_node_shows_its_processes_or_why_not() {
    let mut v = View::new("http://prom:9090", false);
    v.take(snapshot(Ok(fleet()), None));
    v.on_key(key(KeyCode::Enter));
    let open = v.open.clone().unwrap();
    let s = screen(&mut v, 120, 12);
    assert!(s.contains("asking Prometheus about this node…"), "{s}");
    let p = Process {
        gpu: "3".into(),
        pid: "4242".into(),
        name: "python3".into(),
        user: Some("svc".into()),
        pod: Some(("serve".into(), "vllm-0".into())),
        kind: Some("C".into()),
        bytes: 12 * GIB,
    };
    v.take(snapshot(
        Ok(fleet()),
        Some(Detail {
            node: open.clone(),
            read: Ok((Fleet::default(), vec![p])),
        }),
    ));
    let s = screen(&mut v, 120, 12);
    assert!(
        s.contains("node node-b (hmn node-b:10466) · hypomnesis"),
        "{s}"
    );
    let line = s.lines().find(|l| l.contains("4242")).unwrap();
    assert!(
        line.contains("svc") && line.contains("python3") && line.contains("12.0 GiB"),
        "{line}"
    );
    assert!(line.contains("serve/vllm-0"), "{line}");
    assert!(s.contains("no GPU with recent samples"), "{s}");
    v.take(snapshot(
        Ok(fleet()),
        Some(Detail {
            node: open,
            read: Err("Prometheus answered 503".into()),
        }),
    ));
    assert!(screen(&mut v, 120, 12).contains("could not read this node: Prometheus answered 503"));
}

#[test]
fn an_age_that_is_no_number_is_drawn_as_unknown() {
    let mut v = View::new("http://prom:9090", false);
    let mut odd = node("node-q", 1, 80);
    (odd.stale, odd.age) = (true, Some(f64::NAN));
    v.take(snapshot(Ok(vec![odd]), None));
    let s = screen(&mut v, 150, 8);
    let row = s.lines().find(|l| l.starts_with("node-q")).unwrap();
    assert!(row.trim_end().ends_with("stale ?"), "{row}");
}
