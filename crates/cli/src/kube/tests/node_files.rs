//! The node's files a DRA measurement reads, as anything may have been put in their place: a
//! FIFO named as a CDI spec or as the DRA driver's checkpoint, a spec nested 100,000 deep; and
//! an unchanged spec, not parsed again at every measurement.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Dir;
use crate::kube::{booked, cdi, nodefile};

/// A rootfs with the DRA fixture node's CDI specs and checkpoint, copied.
fn node_copy() -> Dir {
    let dir = Dir::new();
    let fixture = hypomnesis_testkit::fixtures("dra").join("rootfs");
    for sub in [
        "etc/cdi",
        "var/run/cdi",
        "var/lib/kubelet/plugins/gpu.nvidia.com",
    ] {
        std::fs::create_dir_all(dir.0.join(sub)).unwrap();
        for f in std::fs::read_dir(fixture.join(sub)).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, dir.0.join(sub).join(f.file_name().unwrap())).unwrap();
        }
    }
    dir
}

/// `read` run on a thread of its own: what it gave and how long it took, or `None` when it
/// has not returned within 10 s (then `fifo` is opened for writing, to let it go).
fn promptly<T: Send + 'static>(
    fifo: &Path,
    read: impl FnOnce() -> T + Send + 'static,
) -> Option<(T, Duration)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let start = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(read());
    });
    let got = rx.recv_timeout(Duration::from_secs(10)).ok();
    if got.is_none() {
        // The reader waits for a writer: one comes and goes, and it reads nothing.
        drop(std::fs::OpenOptions::new().write(true).open(fifo));
    }
    got.map(|g| (g, start.elapsed()))
}

/// A FIFO named `x.yaml` among the specs, no writer ever coming: the read returns at once,
/// names it as a FIFO, and reads every other spec (it waited for a writer forever, and with
/// it every measurement after).
#[test]
fn a_fifo_among_the_specs_is_named_and_the_rest_read() {
    let node = node_copy();
    let fifo = node.0.join("var/run/cdi/x.yaml");
    hypomnesis_testkit::mkfifo(&fifo);
    let root = node.0.clone();
    let cache = Mutex::new(nodefile::Cache::new());
    let (specs, took) = promptly(&fifo, move || cdi::read_with(&root, &cache))
        .expect("the read of the specs never returned");
    assert!(took < Duration::from_secs(2), "{took:?}");
    let fifo_said: Vec<&(PathBuf, String)> = specs
        .unreadable
        .iter()
        .filter(|(p, _)| *p == fifo)
        .collect();
    assert_eq!(fifo_said.len(), 1, "{specs:?}");
    assert_eq!(fifo_said[0].1, "a FIFO, not a regular file");
    assert!(
        specs
            .nodes
            .keys()
            .filter(|k| k.starts_with("k8s.gpu.nvidia.com/claim="))
            .count()
            >= 2,
        "{specs:?}"
    );
    assert!(
        specs.nodes.contains_key("example.com/nic=nic-3"),
        "{specs:?}"
    );
}

/// A FIFO in place of the DRA driver's checkpoint: refused at once, naming it.
#[test]
fn a_fifo_for_the_checkpoint_is_refused_at_once() {
    let node = node_copy();
    let checkpoint = node.0.join(booked::CHECKPOINT);
    std::fs::remove_file(&checkpoint).unwrap();
    hypomnesis_testkit::mkfifo(&checkpoint);
    let root = node.0.clone();
    let cache = Mutex::new(nodefile::Cache::new());
    let (got, took) = promptly(&checkpoint, move || {
        booked::read_with(&root, &cache).map(|b| b.len())
    })
    .expect("the read of the checkpoint never returned");
    assert!(took < Duration::from_secs(2), "{took:?}");
    let why = got.unwrap_err();
    assert!(
        why.contains("checkpoint.json: a FIFO, not a regular file"),
        "{why}"
    );
}

/// A spec of 100,000 `[`: refused at once, naming the depth, the other specs read (the
/// parser took 4.5 s over it on a debug build, at every measurement).
#[test]
fn a_spec_nested_100_000_deep_is_refused_at_once() {
    let node = node_copy();
    let deep = node.0.join("var/run/cdi/deep.yaml");
    std::fs::write(&deep, "[".repeat(100_000)).unwrap();
    let cache = Mutex::new(nodefile::Cache::new());
    let t = Instant::now();
    let specs = cdi::read_with(&node.0, &cache);
    let took = t.elapsed();
    assert!(took < Duration::from_millis(500), "{took:?}");
    let said: Vec<&String> = specs
        .unreadable
        .iter()
        .filter(|(p, _)| *p == deep)
        .map(|(_, why)| why)
        .collect();
    assert_eq!(said.len(), 1, "{specs:?}");
    assert!(
        said[0].contains("nested more than 64 deep (line 1)"),
        "{}",
        said[0]
    );
    assert!(
        specs.nodes.contains_key("example.com/nic=nic-3"),
        "{specs:?}"
    );
}

/// The specs are parsed once while unchanged: three reads of the node parse each spec once;
/// a spec rewritten is parsed again, alone; one removed gives nothing more. The checkpoint,
/// read three times, is parsed once.
#[test]
fn an_unchanged_spec_is_not_parsed_again() {
    let node = node_copy();
    let cache = Mutex::new(nodefile::Cache::new());
    let parses = || cache.lock().unwrap().parses();
    let first = cdi::read_with(&node.0, &cache);
    let specs = 4; // two claims' specs, the NIC's JSON and the broken one
    assert_eq!(parses(), specs);
    for _ in 0..2 {
        assert_eq!(cdi::read_with(&node.0, &cache), first);
    }
    assert_eq!(parses(), specs, "nothing changed, nothing parsed");
    let nic = node.0.join("etc/cdi/example.com-nic.json");
    let text = std::fs::read_to_string(&nic).unwrap();
    std::fs::write(&nic, text.replace("nic-3", "nic-4")).unwrap();
    let second = cdi::read_with(&node.0, &cache);
    assert_eq!(parses(), specs + 1);
    assert!(
        second.nodes.contains_key("example.com/nic=nic-4"),
        "{second:?}"
    );
    std::fs::remove_file(&nic).unwrap();
    let third = cdi::read_with(&node.0, &cache);
    assert_eq!(parses(), specs + 1);
    assert!(
        !third
            .nodes
            .keys()
            .any(|k| k.starts_with("example.com/nic="))
    );
    let bookings = Mutex::new(nodefile::Cache::new());
    for _ in 0..3 {
        assert_eq!(booked::read_with(&node.0, &bookings).unwrap().len(), 2);
    }
    assert_eq!(bookings.lock().unwrap().parses(), 1);
}
