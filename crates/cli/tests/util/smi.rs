#![allow(dead_code)]
//! A counting `nvidia-smi` on `PATH`: a shell script named `nvidia-smi` in a folder of its own
//! that writes one line per run (its arguments) to a log, then answers as the replaying
//! stand-in (`fake-nvidia-smi`, the L40S capture) does, fails with exit status 9 as a driver
//! that cannot be reached, or answers after a pause. Put [`CountingSmi::dir`] on `PATH`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// How the stand-in behaves.
#[derive(Debug, Clone, Copy)]
pub enum Smi {
    /// Answers from the capture.
    Answers,
    /// Prints nvidia-smi's driver message and exits with status 9.
    Fails,
    /// Answers from the capture after this many milliseconds.
    Sleeps(u32),
    /// As `Sleeps`, and writes `OVERLAP <arguments>` to the log when another run of it is
    /// under way as it starts.
    SleepsAlone(u32),
}

/// The stand-in's folder and its log, removed when dropped.
pub struct CountingSmi {
    pub dir: PathBuf,
    pub log: PathBuf,
}

impl CountingSmi {
    /// A new stand-in behaving as `how`, in a folder named after `what` and this test process.
    pub fn new(what: &str, how: Smi) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "hmn-counting-smi-{what}-{}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("runs.log");
        let replay = format!(
            "FAKE_SMI_CAPTURE={} exec {} \"$@\"",
            quoted(&support::capture("linux-x86_64__nvidia-l40s__595.80.txt")),
            quoted(&support::fake_smi())
        );
        let then = match how {
            Smi::Answers => replay,
            Smi::Fails => "echo \"NVIDIA-SMI has failed because it couldn't communicate with \
                           the NVIDIA driver.\"\nexit 9"
                .to_string(),
            Smi::Sleeps(ms) => format!("FAKE_SMI_MODE=sleep-ms:{ms} {replay}"),
            Smi::SleepsAlone(ms) => format!(
                "running={running}\n\
                 if /bin/mkdir \"$running\" 2>/dev/null; then mine=1; else mine=0; echo \"OVERLAP $*\" >> {log}; fi\n\
                 FAKE_SMI_MODE=sleep-ms:{ms} FAKE_SMI_CAPTURE={capture} {smi} \"$@\"\n\
                 rc=$?\n\
                 [ $mine = 1 ] && /bin/rmdir \"$running\"\n\
                 exit $rc",
                running = quoted(&dir.join("running")),
                log = quoted(&log),
                capture = quoted(&support::capture("linux-x86_64__nvidia-l40s__595.80.txt")),
                smi = quoted(&support::fake_smi()),
            ),
        };
        let script = format!(
            "#!/bin/sh\necho \"$*\" >> {}\nunset FAKE_SMI_MODE FAKE_SMI_LOG\n{then}\n",
            quoted(&log)
        );
        let exe = dir.join("nvidia-smi");
        std::fs::write(&exe, script).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { dir, log }
    }

    /// The runs so far: the arguments of each, in order.
    pub fn runs(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl CountingSmi {
    /// Runs `hmn doctor` (which asks every source, nvidia-smi included) with this stand-in first
    /// on `PATH` and the fake NVML `lib` answering `scenario`, and asserts that it counted runs:
    /// the control of a test that counts none.
    pub fn assert_counts_a_doctor(&self, lib: &Path, scenario: &Path) {
        let before = self.runs().len();
        let out = crate::util::hmn::hmn()
            .arg("doctor")
            .env("HYPOMNESIS_NVML_LIBRARY", lib)
            .env("FAKE_NVML_SCENARIO", scenario)
            .env("HYPOMNESIS_SYSFS", support::empty_dir())
            .env("PATH", format!("{}:/usr/bin:/bin", self.dir.display()))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            self.runs().len() > before,
            "hmn doctor did not run the stand-in: {said}"
        );
        assert!(said.contains(&self.dir.display().to_string()), "{said}");
    }
}

impl Drop for CountingSmi {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `path` in single quotes for sh.
fn quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}
