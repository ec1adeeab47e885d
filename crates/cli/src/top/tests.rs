//! `hmn top` drawn through ratatui's test backend, from frames made by hand and folded by the
//! same [`Builder`] the sampling thread uses, against the text snapshots in `snapshots/`
//! (`HMN_UPDATE_SNAPSHOTS=1 cargo test --all-features --bin hmn top::` rewrites them; the diff
//! is then reviewed like code).
#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use hypomnesis::{
    GpuContextKind, GpuDeviceInfo, GpuProcessEntry, GpuQuerySource, GpuVendor, HostMemory,
    MigGpuInstance, ProcessContext, Utilization,
};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Color;

use super::draw::gpus::{split, wrap};
use super::draw::{Late, draw, human};
use super::model::{Builder, Screen};
use super::state::ViewState;
use hypomnesis::sampling::Identity;
use hypomnesis::sampling::{DeviceFrame, Frame};

use crate::view::{GIB, MIB};

fn h200(index: u32, free: u64) -> GpuDeviceInfo {
    let total = 143_771 * MIB;
    GpuDeviceInfo::builder()
        .index(index)
        .name(Some("NVIDIA H200".into()))
        .total_bytes(total)
        .reserved_bytes(Some(614 * MIB))
        .free_bytes(free)
        .used_bytes(total - free)
        .vendor(Some(GpuVendor::Nvidia))
        .driver_version(Some("590.48.01".into()))
        .build()
}

fn row(pid: u32, device: u32, used: u64, kind: GpuContextKind, name: &str) -> GpuProcessEntry {
    GpuProcessEntry::builder()
        .pid(pid)
        .device_index(device)
        .used_bytes(used)
        .context(Some(kind))
        .name(Some(name.into()))
        .build()
}

fn ctx(user: &str, command: &str, rss: u64, cpu_ms: u64) -> Identity {
    let mut c = Identity::default();
    (c.user, c.command) = (Some(user.into()), Some(command.into()));
    (c.rss_bytes, c.cpu_time) = (Some(rss), Some(Duration::from_millis(cpu_ms)));
    c
}

/// A device's part of a frame: its figures and processes.
fn device(info: GpuDeviceInfo, rows: Vec<GpuProcessEntry>) -> DeviceFrame {
    let mut d = DeviceFrame::default();
    (d.info, d.processes) = (Some(Ok(info)), Some(Ok(rows)));
    d
}

fn frame(at: u64, devices: Vec<(GpuDeviceInfo, Vec<GpuProcessEntry>)>) -> Frame {
    Frame::new(
        Duration::from_secs(at),
        Ok(u32::try_from(devices.len()).unwrap()),
        devices
            .into_iter()
            .map(|(info, rows)| device(info, rows))
            .collect(),
        BTreeMap::new(),
    )
}

#[allow(clippy::unnecessary_wraps)] // the type a screen takes
fn ram() -> Result<HostMemory, String> {
    Ok(HostMemory::new(24 * GIB, Some(18 * GIB)))
}

fn me(cpu_ms: u64) -> ProcessContext {
    let mut c = ProcessContext::default();
    c.rss_bytes = Some(9 * MIB);
    c.cpu_time = Some(Duration::from_millis(cpu_ms));
    c
}

/// Two H200s over three refreshes: a job grows on GPU 0, a process starts on GPU 1 and
/// another exits; 17.8 GiB on GPU 0 is held by processes this view cannot see.
fn two_gpus() -> Screen {
    let mut b = Builder::default();
    let contexts: BTreeMap<u32, Identity> = [
        (
            4242,
            ctx("alice", "python3 train.py --lr 1e-4 --batch 64", 6 * GIB, 0),
        ),
        (
            5151,
            ctx("bob", "python3 -m vllm.entrypoints.api_server", 3 * GIB, 0),
        ),
        (6060, ctx("carol", "llama-server -m q4.gguf", GIB, 0)),
    ]
    .into_iter()
    .collect();
    let hidden = 17_800 * MIB;
    let mut last = Screen::waiting();
    for (t, grow) in [(0, 0), (1, 2 * GIB), (2, 4 * GIB)] {
        let job = 40 * GIB + grow;
        let serve = 20 * GIB;
        let mut rows0 = vec![row(4242, 0, job, GpuContextKind::Compute, "python3")];
        let mut rows1 = vec![row(
            5151,
            1,
            serve,
            GpuContextKind::ComputeAndGraphics,
            "python3",
        )];
        if t < 2 {
            rows1.push(row(7070, 1, GIB, GpuContextKind::Graphics, "Xorg"));
        }
        if t == 2 {
            rows1.push(row(
                6060,
                1,
                2 * GIB,
                GpuContextKind::Compute,
                "llama-server",
            ));
        }
        let used0 = 614 * MIB + job + hidden;
        let used1 = 614 * MIB + rows1.iter().map(|r| r.used_bytes).sum::<u64>();
        let mut f = frame(
            t,
            vec![
                (h200(0, 143_771 * MIB - used0), std::mem::take(&mut rows0)),
                (h200(1, 143_771 * MIB - used1), rows1),
            ],
        );
        f.devices[0].utilization = Some(Ok(Utilization::new(
            Some(87),
            Some(41),
            GpuQuerySource::Nvml,
        )));
        let mut c = contexts.clone();
        for (pid, p) in &mut c {
            p.cpu_time = Some(Duration::from_millis(t * u64::from(*pid % 7) * 150));
        }
        last = b.screen(&f, |_| c, ram(), &me(t * 4), None);
    }
    last
}

fn render(screen: &Screen, state: &ViewState, width: u16, height: u16) -> (String, TestBackend) {
    render_late(screen, state, None, width, height)
}

fn render_late(
    screen: &Screen,
    state: &ViewState,
    late: Option<&Late>,
    width: u16,
    height: u16,
) -> (String, TestBackend) {
    let mut t = Terminal::new(TestBackend::new(width, height)).unwrap();
    t.draw(|f| {
        draw(f, screen, state, Duration::from_secs(1), late);
    })
    .unwrap();
    let backend = t.backend().clone();
    let buf = backend.buffer();
    let mut text = String::new();
    for y in 0..height {
        let line: String = (0..width).map(|x| buf[(x, y)].symbol()).collect();
        text.push_str(line.trim_end());
        text.push('\n');
    }
    (text, backend)
}

fn check(name: &str, text: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/top/snapshots")
        .join(format!("{name}.txt"));
    if std::env::var_os("HMN_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (HMN_UPDATE_SNAPSHOTS=1 writes it)", path.display()));
    assert_eq!(text, want, "{name}: the view differs from its snapshot");
}

#[test]
fn two_gpus_with_hidden_memory_new_and_exited_processes() {
    let screen = two_gpus();
    let (text, _) = render(&screen, &ViewState::default(), 110, 24);
    check("two-gpus", &text);
    // The figures, whatever the layout: what no visible process holds, and the changes.
    assert!(text.contains("not visible from here 17.4 GiB"), "{text}");
    assert!(text.contains("+6060"), "{text}");
    assert!(text.contains("busy 87% (mem 41%)"), "{text}");
    assert!(
        text.contains("(nvml 590.48.01)"),
        "the source and its driver: {text}"
    );
    assert!(text.contains("-7070"), "{text}");
    assert!(text.contains("(exited) Xorg"), "{text}");
}

#[test]
fn picked_gpu_filter_pause_and_help() {
    let screen = two_gpus();
    let state = ViewState {
        gpu: Some(1),
        filter: "python".into(),
        paused: true,
        ..ViewState::default()
    };
    let (text, _) = render(&screen, &state, 110, 24);
    check("gpu1-filtered-paused", &text);
    assert!(
        !text.contains("4242"),
        "GPU 0's process is not listed: {text}"
    );
    let help = ViewState {
        help: true,
        ..ViewState::default()
    };
    check("help", &render(&screen, &help, 110, 24).0);
}

#[test]
fn narrow_and_short_terminals_drop_columns_and_lines_instead_of_wrapping() {
    let screen = two_gpus();
    let (text, _) = render(&screen, &ViewState::default(), 48, 14);
    check("narrow", &text);
    assert!(!text.contains("USER"), "{text}");
    assert!(text.contains("COMMAND"), "{text}");
    for line in text.lines() {
        assert!(line.chars().count() <= 48, "{line}");
    }
}

#[test]
fn mig_instances_and_an_amd_card_with_gtt() {
    let mut b = Builder::default();
    let mig = |gi: u32, profile: &str, used: u64| {
        MigGpuInstance::builder()
            .gpu_instance_id(Some(gi))
            .profile(Some(profile.into()))
            .total_bytes(Some(71 * GIB))
            .used_bytes(Some(used))
            .free_bytes(Some(71 * GIB - used))
            .build()
    };
    let mut f = frame(0, vec![(h200(0, 100 * GIB), Vec::new())]);
    f.devices[0].mig = Some(vec![mig(1, "3g.71gb", 30 * GIB), mig(2, "3g.71gb", 0)]);
    let amd = GpuDeviceInfo::builder()
        .index(1)
        .name(Some("AMD Radeon RX 7900 XTX".into()))
        .total_bytes(24 * GIB)
        .free_bytes(20 * GIB)
        .used_bytes(4 * GIB)
        .gtt_total_bytes(Some(32 * GIB))
        .gtt_used_bytes(Some(GIB / 2))
        .vendor(Some(GpuVendor::Amd))
        .source(GpuQuerySource::Drm)
        .build();
    let mut d = device(amd, Vec::new());
    d.utilization = Some(Ok(Utilization::new(Some(37), None, GpuQuerySource::Drm)));
    f.devices.push(d);
    f.count = Ok(2);
    let screen = b.screen(&f, |_| BTreeMap::new(), ram(), &me(0), None);
    let (text, _) = render(&screen, &ViewState::default(), 110, 22);
    check("mig-and-amd", &text);
    assert!(
        text.contains("MIG GI 1 3g.71gb  used 30.0 GiB of 71.0 GiB"),
        "{text}"
    );
    assert!(
        text.contains("GTT 512 MiB of 32.0 GiB, busy 37%, 0 processes"),
        "{text}"
    );
}

#[test]
fn no_gpu_shows_ram_the_reason_and_the_hosts_processes_by_rss() {
    let mut b = Builder::default();
    let f = Frame::new(
        Duration::ZERO,
        Ok(0),
        Vec::new(),
        [
            (1, Some(12 * MIB)),
            (2, None),
            (300, Some(2 * GIB)),
            (301, Some(600 * MIB)),
        ]
        .into_iter()
        .collect(),
    );
    let contexts: BTreeMap<u32, Identity> = [
        (1, ctx("root", "/sbin/init", 12 * MIB, 0)),
        (300, ctx("alice", "python3 notebook.py", 2 * GIB, 0)),
        (301, ctx("bob", "postgres: writer", 600 * MIB, 0)),
    ]
    .into_iter()
    .collect();
    let screen = b.screen(&f, |_| contexts, ram(), &me(0), None);
    let (text, _) = render(&screen, &ViewState::default(), 100, 10);
    check("no-gpu", &text);
    assert!(text.contains("RAM 24.0 GiB, 18.0 GiB available"), "{text}");
    assert!(text.contains("No GPU found"), "{text}");
    assert!(!text.contains("GPU MEM"), "no GPU column: {text}");
    assert!(text.contains("RSS▼"), "ordered by RSS: {text}");
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("PID"))
        .skip(1)
        .collect();
    assert!(
        rows[0].starts_with("300 ") && rows[1].starts_with("301 ") && rows[2].starts_with("1 "),
        "{text}"
    );
    assert_eq!(
        rows.iter().filter(|l| l.starts_with("2 ")).count(),
        0,
        "no RSS, no row"
    );
    let failed = Frame::new(
        f.at,
        Err(hypomnesis::Failure::new(
            hypomnesis::ErrorKind::DriverVersionMismatch,
            "NVML: could not count GPUs: driver/library version mismatch",
        )),
        f.devices.clone(),
        BTreeMap::new(),
    );
    // The processes of the last refresh are shown as exited, once.
    let screen = b.screen(&failed, |_| BTreeMap::new(), ram(), &me(0), None);
    let (text, _) = render(&screen, &ViewState::default(), 100, 8);
    assert!(text.contains("-300") && text.contains("(exited)"), "{text}");
    // A view that never read a process.
    let mut fresh = Builder::default();
    let screen = fresh.screen(
        &failed,
        |_| BTreeMap::new(),
        Err("meminfo: gone".into()),
        &me(0),
        None,
    );
    let (text, _) = render(&screen, &ViewState::default(), 100, 8);
    assert!(text.contains("version mismatch"), "{text}");
    assert!(text.contains("RAM: meminfo: gone"), "{text}");
    assert!(text.contains("(no process can be read here)"), "{text}");
}

#[test]
fn hostile_names_cannot_reach_the_terminal() {
    let mut b = Builder::default();
    let f = frame(
        0,
        vec![(
            h200(0, 100 * GIB),
            vec![row(66, 0, GIB, GpuContextKind::Compute, "x")],
        )],
    );
    let contexts = [(
        66,
        ctx("mallory\x1b[31m", "evil\x1b[2J\nrm -rf /\x07", GIB, 0),
    )]
    .into_iter()
    .collect();
    let screen = b.screen(&f, |_| contexts, ram(), &me(0), None);
    let (text, _) = render(&screen, &ViewState::default(), 100, 12);
    check("hostile", &text);
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
    assert!(text.contains("evil?[2J?rm -rf /?"), "{text}");
}

#[test]
fn no_color_means_no_colour() {
    let screen = two_gpus();
    let coloured = |state: &ViewState| {
        let (_, backend) = render(&screen, state, 110, 24);
        backend
            .buffer()
            .content()
            .iter()
            .any(|c| c.fg != Color::Reset || c.bg != Color::Reset)
    };
    assert!(coloured(&ViewState::default()));
    let plain = ViewState {
        color: false,
        ..ViewState::default()
    };
    assert!(!coloured(&plain), "NO_COLOR: no colour anywhere");
}

#[test]
fn bar_parts_add_up_and_durations_read_well() {
    assert_eq!(split([1, 2, 0, 1], 8), [2, 4, 0, 2]);
    assert_eq!(split([0, 0, 0, 0], 8), [0, 0, 0, 0]);
    assert_eq!(split([1, 1000, 1, 1000], 10).iter().sum::<usize>(), 10);
    assert_eq!(
        split([1, 1000, 1, 1000], 10)[0],
        1,
        "a small part still shows"
    );
    assert_eq!(split([5, 5, 5, 5], 0), [0, 0, 0, 0]);
    assert_eq!(wrap("a bb ccc dddd", 6), ["a bb", "ccc", "dddd"]);
    assert_eq!(
        wrap("abcdefgh", 3),
        ["abc", "def", "gh"],
        "a long word is cut"
    );
    assert_eq!(wrap("", 5), [""]);
    assert_eq!(human(Duration::from_millis(250)), "250ms");
    assert_eq!(human(Duration::from_secs(1)), "1s");
    assert_eq!(human(Duration::from_millis(1500)), "1.5s");
    assert_eq!(human(Duration::from_secs(240)), "4m");
    assert_eq!(human(Duration::from_secs(150)), "2m30s");
    assert_eq!(human(Duration::from_secs(3600)), "1h");
    assert_eq!(human(Duration::from_secs(3900)), "1h5m");
}

/// A late refresh is said in the header: how old the figures are and on what the measurement
/// waits (a hostile path shown printable), or how long the view has waited for its first.
#[test]
fn a_late_refresh_says_how_old_the_figures_are_and_what_it_waits_for() {
    let screen = two_gpus();
    let late = Late {
        age: Some(Duration::from_secs(8)),
        waited: Duration::from_secs(8),
        on: Some("/proc/1000/cmdline".into()),
    };
    let (text, backend) = render_late(&screen, &ViewState::default(), Some(&late), 110, 24);
    check("late", &text);
    let head = text.lines().next().unwrap();
    assert!(
        head.contains("figures 8s old: waiting for /proc/1000/cmdline"),
        "{head}"
    );
    let at = head.find("figures").unwrap();
    let cell = &backend.buffer()[(u16::try_from(at).unwrap(), 0)];
    assert_eq!(cell.fg, Color::Red, "marked, not shown as live");
    let first = Late {
        age: None,
        waited: Duration::from_secs(12),
        on: Some("the NVIDIA driver (nvmlDeviceGetMemoryInfo)\x1b[2J".into()),
    };
    let (text, _) = render_late(
        &Screen::waiting(),
        &ViewState::default(),
        Some(&first),
        200,
        10,
    );
    let head = text.lines().next().unwrap();
    assert!(
        head.contains(
            "no figures after 12s: waiting for the NVIDIA driver (nvmlDeviceGetMemoryInfo)?[2J"
        ),
        "{head}"
    );
    let unknown = Late { on: None, ..late };
    let (text, _) = render_late(&screen, &ViewState::default(), Some(&unknown), 110, 24);
    assert!(
        text.contains("figures 8s old: the refresh has not returned"),
        "{text}"
    );
}

/// Late once a refresh is overdue by an interval and a second more; never while paused; a
/// pause's end starts the wait again.
#[test]
fn a_refresh_is_late_after_an_interval_and_a_second_more_and_never_while_paused() {
    use super::ui::Freshness;
    let start = std::time::Instant::now();
    let at = |ms: u64| start + Duration::from_millis(ms);
    let second = Duration::from_secs(1);
    let mut f = Freshness::new(start);
    assert_eq!(f.late(at(1999), second, false), None);
    let late = f.late(at(2000), second, false).unwrap();
    assert_eq!((late.age, late.waited), (None, Duration::from_secs(2)));
    f.taken = Some(at(2500));
    assert_eq!(f.late(at(4499), second, false), None);
    let late = f.late(at(5700), second, false).unwrap();
    assert_eq!(late.age, Some(Duration::from_secs(3)), "whole seconds");
    assert_eq!(f.late(at(9000), second, true), None, "paused");
    f.expected_since = at(9000);
    assert_eq!(f.late(at(10_999), second, false), None, "after the pause");
    assert_eq!(
        f.late(at(11_000), second, false).unwrap().age,
        Some(Duration::from_secs(8))
    );
    // A long interval: one missed interval more.
    let ten = Duration::from_secs(10);
    assert_eq!(f.late(at(28_999), ten, false), None);
    assert!(f.late(at(29_000), ten, false).is_some());
}

/// MPS: a client in the compute and MPS lists is one `M+C` row, one in the MPS list only `M`,
/// and the server's command is marked.
#[test]
fn mps_clients_show_their_type_and_the_server_is_marked() {
    let mut b = Builder::default();
    let mut server = row(900, 0, 30 * MIB, GpuContextKind::Compute, "nvidia-cuda-mps");
    server.mps_server = true;
    let rows = vec![
        server,
        row(901, 0, 3 * GIB, GpuContextKind::MpsAndCompute, "python3"),
        row(902, 0, 2 * GIB, GpuContextKind::Mps, "python3"),
    ];
    let used = 614 * MIB + 30 * MIB + 5 * GIB;
    let f = frame(0, vec![(h200(0, 143_771 * MIB - used), rows)]);
    let screen = b.screen(&f, |_| BTreeMap::new(), ram(), &me(0), None);
    let (text, _) = render(&screen, &ViewState::default(), 110, 24);
    let line = |pid: &str| {
        text.lines()
            .find(|l| l.starts_with(pid))
            .unwrap_or_else(|| panic!("{pid} in\n{text}"))
            .to_string()
    };
    assert!(line("901").contains(" M+C "), "{text}");
    assert!(line("902").contains(" M "), "{text}");
    assert!(
        line("900").ends_with("nvidia-cuda-mps (MPS server)"),
        "{text}"
    );
}

#[test]
fn the_terminal_thread_sleeps_until_the_view_would_turn_late() {
    use std::time::Instant;

    use super::ui::{Freshness, wait_for};
    let now = Instant::now();
    let second = Duration::from_secs(1);
    let ago = |ms| now.checked_sub(Duration::from_millis(ms)).unwrap();
    let mut fresh = Freshness::new(ago(5_000));
    // Just measured, a refresh a second: the view turns late 2 s on (an interval and a
    // second more); a refresh or a key wakes the thread before then.
    fresh.taken = Some(now);
    assert_eq!(wait_for(&fresh, second, false, now), Some(2 * second));
    // Measured 1.96 s ago: 40 ms left.
    fresh.taken = Some(ago(1_960));
    assert_eq!(
        wait_for(&fresh, second, false, now),
        Some(Duration::from_millis(40))
    );
    // Late already: once a second, for the age it shows.
    fresh.taken = Some(ago(3_000));
    assert_eq!(wait_for(&fresh, second, false, now), Some(second));
    // Nothing yet: counted from when the view began to expect it.
    let fresh = Freshness::new(ago(500));
    assert_eq!(
        wait_for(&fresh, second, false, now),
        Some(Duration::from_millis(1_500))
    );
    // A fast interval, almost late: never below 10 ms.
    let mut fast = Freshness::new(ago(5_000));
    fast.taken = Some(ago(1_098));
    assert_eq!(
        wait_for(&fast, Duration::from_millis(100), false, now),
        Some(Duration::from_millis(10))
    );
    // Paused: never late; only a key, a signal or a refresh wakes it.
    assert_eq!(wait_for(&fresh, second, true, now), None);
}

mod grouped;
mod over;
mod selection;

#[test]
fn ghosts_are_marked_on_their_rows_and_listed_under_ram() {
    use hypomnesis::{Ghost, GhostClass, GhostReport};
    let mut screen = two_gpus();
    let (plain, _) = render(&screen, &ViewState::default(), 110, 24);
    assert!(!plain.contains("ghosts:"), "no look, no key: {plain}");
    let mut report = GhostReport::default();
    report.ghosts = vec![
        Ghost::new(GhostClass::Idle, 1, Some(5151), 20 * GIB),
        Ghost::new(GhostClass::Unaccounted, 0, None, 17_800 * MIB),
    ];
    screen.ghosts = Some(std::sync::Arc::new(report));
    let (text, _) = render(&screen, &ViewState::default(), 110, 24);
    check("ghosts", &text);
    let row = text.lines().find(|l| l.starts_with("5151")).unwrap();
    assert!(row.contains("[idle] python3 -m vllm"), "{text}");
    let key = text.lines().find(|l| l.starts_with("ghosts:")).unwrap();
    assert!(
        key.contains("[idle] pid 5151 20.0 GiB, [unaccounted] GPU 0 17.4 GiB"),
        "largest first: {key}"
    );
    assert!(
        !text.lines().any(|l| l.contains("4242") && l.contains('[')),
        "a row that is no ghost has no mark: {text}"
    );
    // A fact that is no proof (an orphan at work): marked in parentheses, not listed as a
    // ghost; a new fact is drawn.
    let mut report = (**screen.ghosts.as_ref().unwrap()).clone();
    report.facts = vec![hypomnesis::GhostFact::new(
        GhostClass::Orphan,
        0,
        4242,
        vec!["the leader 4200 of its session is gone".into()],
    )];
    let before = screen.clone();
    screen.ghosts = Some(std::sync::Arc::new(report));
    let (text, _) = render(&screen, &ViewState::default(), 110, 24);
    let row = text.lines().find(|l| l.starts_with("4242")).unwrap();
    assert!(row.contains("(orphan) "), "{text}");
    let key = text.lines().find(|l| l.starts_with("ghosts:")).unwrap();
    assert!(!key.contains("4242"), "{key}");
    assert!(!super::draw::draws_alike(
        &before,
        &screen,
        None,
        std::time::Duration::from_secs(1)
    ));
}

/// Two refreshes that print the same figures draw alike, whatever bytes lie under them; one
/// whose printed RAM, own CPU share, a process's figure or the GPU history moved does not.
#[test]
fn refreshes_that_print_the_same_figures_draw_alike() {
    let rows = || vec![row(4242, 0, 2 * GIB, GpuContextKind::Compute, "python3")];
    let screen = |b: &mut Builder, t: u64, available: u64, cpu_ms: u64, used: u64| {
        let mut rows = rows();
        rows[0].used_bytes = used;
        let f = frame(t, vec![(h200(0, 100 * GIB), rows)]);
        let ram = Ok(HostMemory::new(24 * GIB, Some(available)));
        b.screen(&f, |_| BTreeMap::new(), ram, &me(cpu_ms), None)
    };
    let alike = |a: &Screen, b: &Screen| {
        super::draw::draws_alike(a, b, None, std::time::Duration::from_secs(1))
    };
    // The GPU history fills first: while it grows, each refresh is drawn.
    let mut b = Builder::default();
    let mut last = screen(&mut b, 0, 18 * GIB, 0, 2 * GIB);
    let mut grown = screen(&mut b, 1, 18 * GIB, 0, 2 * GIB);
    assert!(!alike(&last, &grown), "the history grew");
    for t in 2..=super::model::HISTORY as u64 + 1 {
        last = grown;
        grown = screen(&mut b, t, 18 * GIB, 0, 2 * GIB);
    }
    assert!(alike(&last, &grown), "a full, flat history");
    // 1 MiB less available RAM prints as 18.0 GiB still.
    let same_ram = screen(&mut b, 700, 18 * GIB - MIB, 0, 2 * GIB);
    assert!(alike(&grown, &same_ram));
    let ram_moved = screen(&mut b, 701, 17 * GIB, 0, 2 * GIB);
    assert!(!alike(&same_ram, &ram_moved));
    // Its own CPU share (0.0% at t=701 and t=702, then 1 s of CPU in 1 s).
    let still = screen(&mut b, 702, 17 * GIB, 0, 2 * GIB);
    let busy = screen(&mut b, 703, 17 * GIB, 1000, 2 * GIB);
    assert!(alike(&ram_moved, &still));
    assert!(!alike(&still, &busy));
    let procs_moved = screen(&mut b, 704, 17 * GIB, 1000, 3 * GIB);
    assert!(!alike(&busy, &procs_moved));
    // A look for ghosts: what it found is drawn, what it read to find it is not.
    let look = |evidence: &str, bytes: u64| {
        let mut ghost = hypomnesis::Ghost::new(hypomnesis::GhostClass::Idle, 0, Some(4242), bytes);
        ghost.evidence = vec![evidence.to_string()];
        let mut report = hypomnesis::GhostReport::default();
        report.ghosts = vec![ghost];
        let mut s = procs_moved.clone();
        s.ghosts = Some(std::sync::Arc::new(report));
        s
    };
    let found = look("idle for 30 s", 2 * GIB);
    assert!(!alike(&procs_moved, &found));
    assert!(alike(&found, &look("idle for 40 s", 2 * GIB)));
    assert!(!alike(&found, &look("idle for 40 s", GIB)));
}

/// On a terminal of known width, a GPU's history is compared as its line shows it: once the
/// line is full, a flat history that grows (and is kept up to ten minutes) draws alike, and a
/// point that moves on the line does not; a point that has left the line is not compared.
#[test]
fn a_history_is_compared_as_its_line_shows_it() {
    let mut b = Builder::default();
    let mut screen = |t: u64, used: u64| {
        let mut rows = vec![row(4242, 0, 2 * GIB, GpuContextKind::Compute, "python3")];
        rows[0].used_bytes = used;
        let f = frame(t, vec![(h200(0, 100 * GIB - used), rows)]);
        let ram = Ok(HostMemory::new(24 * GIB, Some(18 * GIB)));
        b.screen(&f, |_| BTreeMap::new(), ram, &me(0), None)
    };
    let second = std::time::Duration::from_secs(1);
    let alike = |a: &Screen, b: &Screen, width| super::draw::draws_alike(a, b, width, second);
    let (w, _) = render(&screen(0, 2 * GIB), &ViewState::default(), 60, 20);
    assert!(w.contains("used, 1 sample"), "{w}");
    let mut screens = vec![screen(1, 2 * GIB)];
    for t in 2..120 {
        screens.push(screen(t, 2 * GIB));
    }
    // 60 cells: at most 42 points, fewer beside the label; the label stops at 41 s.
    let growing = screens
        .windows(2)
        .position(|p| alike(&p[0], &p[1], Some(60)));
    let full = growing.unwrap();
    assert!((30..45).contains(&full), "alike from refresh {full}");
    assert!(
        screens
            .windows(2)
            .skip(full)
            .all(|p| alike(&p[0], &p[1], Some(60))),
        "a full, flat line"
    );
    assert!(
        !alike(&screens[100], &screens[101], None),
        "the whole history still grows"
    );
    assert!(
        !alike(&screens[100], &screens[101], Some(200)),
        "a wider line grows"
    );
    // The GPU's used memory moved: its figures and the latest point.
    let moved = screen(120, 3 * GIB);
    assert!(!alike(&screens[118], &moved, Some(60)));
    // The history line changes at each refresh until the points before the move have left it.
    let mut last = moved;
    let mut changed_at = Vec::new();
    for t in 121..200 {
        let next = screen(t, 3 * GIB);
        if !alike(&last, &next, Some(60)) {
            changed_at.push(t);
        }
        last = next;
    }
    assert_eq!(
        changed_at,
        (121..121 + changed_at.len() as u64).collect::<Vec<_>>()
    );
    assert!((30..45).contains(&changed_at.len()), "{changed_at:?}");
    assert!(alike(&last, &screen(200, 3 * GIB), Some(60)));
}

/// A unified GPU's figures are the host's pool, and the view says so; a coherent one's are
/// its own memory; a discrete one's line is as before.
#[test]
fn the_memory_model_is_said_on_the_gpus_line() {
    let gpu = |model: Option<hypomnesis::MemoryModel>| {
        let mut b = Builder::default();
        let mut d = h200(0, 100 * GIB);
        d.memory_model = model;
        let f = frame(0, vec![(d, Vec::new())]);
        let screen = b.screen(&f, |_| BTreeMap::new(), ram(), &me(0), None);
        render(&screen, &ViewState::default(), 160, 12).0
    };
    let unified = gpu(Some(hypomnesis::MemoryModel::Unified));
    assert!(
        unified.contains(" unified memory (the host's)"),
        "{unified}"
    );
    let coherent = gpu(Some(hypomnesis::MemoryModel::Coherent));
    assert!(coherent.contains("(coherent with the CPU's)"), "{coherent}");
    // Its memory a NUMA node: the kernel's figures of it too.
    let mut b = Builder::default();
    let mut d = h200(0, 100 * GIB);
    d.memory_model = Some(hypomnesis::MemoryModel::Coherent);
    d.numa_node = Some(1);
    d.numa_node_used_bytes = Some(16 * GIB);
    d.numa_node_total_bytes = Some(94 * GIB);
    let f = frame(0, vec![(d, Vec::new())]);
    let screen = b.screen(&f, |_| BTreeMap::new(), ram(), &me(0), None);
    let noded = render(&screen, &ViewState::default(), 160, 12).0;
    assert!(noded.contains(", node 1 16.0 GiB of 94.0 GiB"), "{noded}");
    assert_eq!(
        gpu(Some(hypomnesis::MemoryModel::Discrete)),
        gpu(None),
        "a discrete GPU's line is unchanged"
    );
}
