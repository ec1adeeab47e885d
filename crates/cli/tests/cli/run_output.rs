//! `hmn run` passes its command's output through (and reads it for an engine's lines): every
//! byte arrives, whatever the bytes are and however many; on a terminal the command sees one
//! (its size, its colours kept, no `\n` made `\r\r\n`); stdout and stderr stay apart when
//! they go to different places; a closed output ends the command as it would without hmn.
#![cfg(target_os = "linux")]

use std::io::Read;
use std::process::{Command, Stdio};

use crate::util::hmn::isolated_with_test_path as hmn;

/// `n` bytes of every value, the same each time (xorshift), with the table's words and near
/// misses of its lines among them, and long stretches without a line end.
fn mixed(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::with_capacity(n);
    let lines: [&[u8]; 4] = [
        b"INFO Model loading took a while\n",
        b"Available KV cache memory: 1.00 GiB\r",
        b"\x1b[36mKV Cache is allocated.\x1b[0m\n",
        b"GPU KV cache size: 12 tokens",
    ];
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if x.is_multiple_of(64) {
            out.extend_from_slice(lines[(x >> 8) as usize % lines.len()]);
        } else {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
    out.truncate(n);
    out
}

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("hmn-run-output-{}-{name}", std::process::id()))
}

#[test]
fn binary_garbage_passes_byte_for_byte() {
    let data = mixed(8 << 20);
    let f = tmp("garbage");
    std::fs::write(&f, &data).unwrap();
    let o = hmn().args(["run", "--", "cat"]).arg(&f).output().unwrap();
    std::fs::remove_file(&f).unwrap();
    assert!(o.status.success());
    assert!(
        o.stdout == data,
        "{} bytes of {}",
        o.stdout.len(),
        data.len()
    );
}

#[test]
fn a_gigabyte_flood_passes_whole() {
    // 64 MiB written 16 times: 1 GiB, compared as it comes (not held in memory).
    let block = mixed(64 << 20);
    let f = tmp("flood");
    std::fs::write(&f, &block).unwrap();
    let mut child = hmn()
        .args(["run", "--json", "--", "sh", "-c"])
        .arg(format!(
            "for i in $(seq 16); do cat '{}'; done",
            f.display()
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut buf = vec![0_u8; 1 << 20];
    let (mut at, total) = (0_usize, 16 * block.len());
    let mut tail = Vec::new();
    loop {
        let n = out.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        let mut got = &buf[..n];
        while !got.is_empty() {
            if at >= total {
                tail.extend_from_slice(got);
                break;
            }
            let off = at % block.len();
            let take = got.len().min(block.len() - off).min(total - at);
            assert!(got[..take] == block[off..off + take], "bytes from {at}");
            got = &got[take..];
            at += take;
        }
    }
    assert!(child.wait().unwrap().success());
    std::fs::remove_file(&f).unwrap();
    assert!(at >= total, "{at} of {total} bytes");
    // Then hmn's JSON: the flood's lines were looked at, its near misses gave nothing, its
    // whole lines were heard (bounded), and hmn said so.
    let v: serde_json::Value = serde_json::from_slice(&tail).unwrap();
    let e = &v["engine"];
    assert_eq!(e["engine"], "vllm", "{e}");
    assert!(e["events"].as_array().unwrap().len() <= 4096);
    assert!(e["events_dropped"].as_u64().unwrap() > 0, "{e}");
}

#[test]
fn on_a_terminal_the_command_sees_one_and_its_bytes_arrive_as_written() {
    // `script` gives hmn a terminal (33 rows, 101 columns); the command prints through hmn.
    let hmn_path = env!("CARGO_BIN_EXE_hmn");
    let inner = "[ -t 1 ] && printf 'out-tty\\n'; [ -t 2 ] && printf 'err-tty\\n' >&2; \
                 printf '\\033[31mred\\033[0m\\n'; stty size";
    let o = Command::new("script")
        .args(["-qec"])
        .arg(format!(
            "stty rows 33 cols 101; '{hmn_path}' run -- sh -c \"{inner}\""
        ))
        .arg("/dev/null")
        .env("HYPOMNESIS_SYSFS", support::empty_dir())
        .env("LD_LIBRARY_PATH", support::empty_dir())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    // The outer terminal makes each `\n` `\r\n`, once: hmn's terminal does no processing.
    for want in [
        "out-tty\r\n",
        "err-tty\r\n",
        "\u{1b}[31mred\u{1b}[0m\r\n",
        "33 101\r\n",
    ] {
        assert!(out.contains(want), "{want:?} in {out:?}");
    }
    assert!(!out.contains("\r\r\n"), "{out:?}");
}

#[test]
fn stdout_and_stderr_stay_apart_when_they_go_apart() {
    let o = hmn()
        .args(["run", "--", "sh", "-c", "echo out; echo err >&2; echo out2"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "out\nout2\n");
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("err\nhmn run: "));
}

#[test]
fn a_closed_output_ends_the_command_as_without_hmn() {
    // `yes | head -1`: yes dies of SIGPIPE; through hmn too, and hmn says so by its status.
    let mut child = hmn()
        .args(["run", "--", "yes"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0_u8; 2];
    out.read_exact(&mut first).unwrap();
    drop(out);
    let status = child.wait().unwrap();
    assert_eq!(&first, b"y\n");
    assert_eq!(status.code(), Some(128 + 13));
}

/// A terminal resized while the command runs: its pseudo-terminal follows (the command reads
/// the new size, as it would on hmn's own terminal).
#[cfg(feature = "top")]
#[test]
fn the_commands_terminal_follows_a_resize() {
    use super::top::{Tmux, tmux_here};
    if !tmux_here() {
        return;
    }
    let hmn_path = env!("CARGO_BIN_EXE_hmn");
    let script = format!(
        "'{hmn_path}' run -- sh -c 'stty size <&1; sleep 2; stty size <&1' 2>/dev/null; sleep 30"
    );
    let tmux = Tmux::start("resize", 100, &["sh", "-c", &script]);
    tmux.wait_for("the first size", |s| s.contains("30 100"));
    tmux.cmd(&["resize-window", "-t", "top", "-x", "80", "-y", "20"]);
    tmux.wait_for("the new size", |s| s.contains("20 80"));
}
