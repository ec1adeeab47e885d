//! Test-only stand-in for `nvidia-smi` that replays a recorded capture.
//!
//! Environment:
//! * `FAKE_SMI_CAPTURE` — path of a capture file
//!   (`crates/testkit/fixtures/nvidia-smi/recorded/*.txt`).
//! * `FAKE_SMI_PHASE` — which recorded phase to answer from: `idle` or `load` (default `load`).
//! * `FAKE_SMI_MODE` — `normal` (default), `hang`, `garbage`, `exit-fail`, `reject-reserved`,
//!   `reject-mig` (the `mig.mode.*` fields are unknown, as before R450), `half-line`,
//!   `half-line-apps` (only the process list is cut), `flood`, `sleep-ms:<n>`, `lost-gpu` (the
//!   capture's GPU as GPUs 0, 1 and 3 of four; GPU 2 fell off the bus: its row is nvidia-smi's
//!   `Unable to determine the device handle …` sentence, the process list belongs to GPU 3, and
//!   both queries exit with 15).
//! * `FAKE_SMI_LOG` — when set, each invocation appends its arguments, space-separated, as one
//!   line to this file (so tests can count runs).
//! * `FAKE_SMI_PID_DIR` — when set, each invocation creates an empty file named by its pid in
//!   this folder (so tests can tell whether it still runs).
//!
//! Understood arguments: `--query-gpu=…`, `--query-compute-apps=…` (with
//! `--format=csv[,noheader][,nounits]`), `-i/--id`, `-q/--query` (with any `-d/--display`),
//! `-L/--list-gpus`, `--version`, `-h/--help`, `--help-query-gpu`, `--help-query-compute-apps`,
//! and no arguments (the default table). Each option also accepts its value as the next argument.
//!
//! Exit codes: 0 ok, 2 bad arguments / unknown field (as nvidia-smi), 3 unknown mode,
//! 4 capture missing/unreadable or lacking the needed section, 9 `exit-fail` mode.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// A line of 80 `#` separates the header and the body of every capture section.
const BANNER_LEN: usize = 80;

/// Aliases nvidia-smi accepts for `--query-gpu` fields: (alias, canonical).
const GPU_ALIASES: &[(&str, &str)] = &[
    ("gpu_name", "name"),
    ("gpu_uuid", "uuid"),
    ("gpu_bus_id", "pci.bus_id"),
];

/// Aliases nvidia-smi accepts for `--query-compute-apps` fields: (alias, canonical).
const APP_ALIASES: &[(&str, &str)] =
    &[("name", "process_name"), ("used_memory", "used_gpu_memory")];

/// What `FAKE_SMI_MODE` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Normal,
    Hang,
    Garbage,
    ExitFail,
    RejectReserved,
    /// The `mig.mode.*` fields are unknown fields (drivers before R450).
    RejectMig,
    /// Four GPUs, GPU 2 lost.
    LostGpu,
    HalfLine,
    /// Only the `--query-compute-apps` answer loses half its last line.
    HalfLineApps,
    Flood,
    SleepMs(u64),
}

impl Mode {
    fn parse(text: &str) -> Option<Self> {
        Some(match text.trim() {
            "" | "normal" => Self::Normal,
            "hang" => Self::Hang,
            "garbage" => Self::Garbage,
            "exit-fail" => Self::ExitFail,
            "reject-reserved" => Self::RejectReserved,
            "reject-mig" => Self::RejectMig,
            "lost-gpu" => Self::LostGpu,
            "half-line" => Self::HalfLine,
            "half-line-apps" => Self::HalfLineApps,
            "flood" => Self::Flood,
            other => Self::SleepMs(other.strip_prefix("sleep-ms:")?.trim().parse().ok()?),
        })
    }
}

/// The answer to one invocation.
struct Answer {
    stdout: String,
    stderr: String,
    code: u8,
}

impl Answer {
    fn ok(stdout: String) -> Self {
        Self {
            stdout,
            stderr: String::new(),
            code: 0,
        }
    }

    /// Bad command line or unknown field: nvidia-smi prints to stdout and exits 2.
    fn usage(stdout: String) -> Self {
        Self {
            stdout,
            stderr: String::new(),
            code: 2,
        }
    }

    /// A problem with the capture (not something nvidia-smi would do): stderr, exit 4.
    fn capture_problem(message: String) -> Self {
        Self {
            stdout: String::new(),
            stderr: format!("fake-nvidia-smi: {message}\n"),
            code: 4,
        }
    }
}

fn main() -> ExitCode {
    if let Some(dir) = std::env::var_os("FAKE_SMI_PID_DIR").filter(|p| !p.is_empty()) {
        let path = std::path::Path::new(&dir).join(std::process::id().to_string());
        if let Err(e) = std::fs::write(&path, "") {
            eprintln!("fake-nvidia-smi: cannot write {}: {e}", path.display());
            return ExitCode::from(4);
        }
    }
    if let Some(log) = std::env::var_os("FAKE_SMI_LOG").filter(|p| !p.is_empty()) {
        let line = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
        let logged = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| writeln!(f, "{line}"));
        if let Err(e) = logged {
            eprintln!("fake-nvidia-smi: cannot append to FAKE_SMI_LOG: {e}");
            return ExitCode::from(4);
        }
    }
    let mode_text = std::env::var("FAKE_SMI_MODE").unwrap_or_default();
    let Some(mode) = Mode::parse(&mode_text) else {
        eprintln!(
            "fake-nvidia-smi: unknown FAKE_SMI_MODE {mode_text:?} (expected normal, hang, garbage, \
             exit-fail, reject-reserved, reject-mig, lost-gpu, half-line, half-line-apps, flood \
             or sleep-ms:<n>)"
        );
        return ExitCode::from(3);
    };
    match mode {
        Mode::Hang => std::thread::sleep(Duration::from_secs(3600)),
        Mode::SleepMs(ms) => std::thread::sleep(Duration::from_millis(ms)),
        _ => {}
    }
    match mode {
        Mode::Garbage => {
            let line: &[u8] = b"\x00\xff garbage, not csv\n";
            emit(&line.repeat(3));
            return ExitCode::SUCCESS;
        }
        Mode::ExitFail => {
            emit(
                b"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. \
                  Make sure that the latest NVIDIA driver is installed and running.\n",
            );
            return ExitCode::from(9);
        }
        Mode::Flood => {
            flood(64 * 1024 * 1024);
            return ExitCode::SUCCESS;
        }
        _ => {}
    }

    let args: Vec<String> = std::env::args().skip(1).collect();
    let answer = match load_capture() {
        Ok(capture) => {
            let phase = std::env::var("FAKE_SMI_PHASE").unwrap_or_else(|_| "load".to_owned());
            let phase = if phase.trim().is_empty() {
                "load".to_owned()
            } else {
                phase.trim().to_owned()
            };
            let rejected: &[&str] = match mode {
                Mode::RejectReserved => &["memory.reserved"],
                Mode::RejectMig => &["mig.mode.current", "mig.mode.pending"],
                _ => &[],
            };
            let a = answer(&args, &capture, &phase, rejected, mode == Mode::LostGpu);
            if mode == Mode::LostGpu && a.code == 0 {
                lose_gpu(&args, a)
            } else {
                a
            }
        }
        Err(message) => Answer::capture_problem(message),
    };

    let mut stdout = answer.stdout;
    let apps = args.iter().any(|a| a.starts_with("--query-compute-apps"));
    if mode == Mode::HalfLine || (mode == Mode::HalfLineApps && apps) {
        stdout = cut_last_line(&stdout);
    }
    emit(stdout.as_bytes());
    if !answer.stderr.is_empty() {
        let _ = std::io::stderr().write_all(answer.stderr.as_bytes());
    }
    ExitCode::from(answer.code)
}

/// Writes to stdout, ignoring a closed pipe.
fn emit(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(bytes);
    let _ = out.flush();
}

/// Writes `total` bytes of `x`, stopping quietly if the reader goes away.
fn flood(total: usize) {
    let chunk = vec![b'x'; 64 * 1024];
    let mut out = std::io::stdout().lock();
    let mut left = total;
    while left > 0 {
        let n = left.min(chunk.len());
        if out.write_all(&chunk[..n]).is_err() {
            return;
        }
        left -= n;
    }
    let _ = out.flush();
}

/// The output cut in the middle of its last line, with no trailing newline.
fn cut_last_line(text: &str) -> String {
    let body = text.strip_suffix('\n').unwrap_or(text);
    let start = body.rfind('\n').map_or(0, |i| i + 1);
    let mut cut = start + (body.len() - start) / 2;
    while !body.is_char_boundary(cut) {
        cut -= 1;
    }
    body[..cut].to_owned()
}

fn load_capture() -> Result<String, String> {
    let path = std::env::var_os("FAKE_SMI_CAPTURE")
        .filter(|p| !p.is_empty())
        .ok_or_else(|| "FAKE_SMI_CAPTURE is not set".to_owned())?;
    let bytes = std::fs::read(&path).map_err(|e| {
        format!(
            "cannot read capture {}: {e}",
            std::path::Path::new(&path).display()
        )
    })?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

// ---------------------------------------------------------------------------------------------
// Capture sections
// ---------------------------------------------------------------------------------------------

fn is_banner(line: &str) -> bool {
    line.len() == BANNER_LEN && line.bytes().all(|b| b == b'#')
}

/// One `# <title>` section of a capture.
struct Section<'a> {
    /// The first header line without its `# `, e.g. `load :: query (-q)`.
    title: &'a str,
    /// The raw output lines, trailing blank lines removed.
    body: Vec<&'a str>,
}

/// Splits a capture into sections: a banner, `#` header lines, a banner, then the body up to the
/// next banner (or end of file).
fn sections(capture: &str) -> Vec<Section<'_>> {
    let lines: Vec<&str> = capture
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !is_banner(lines[i]) {
            i += 1;
            continue;
        }
        // Header lines up to the closing banner.
        let mut j = i + 1;
        while j < lines.len() && lines[j].starts_with('#') && !is_banner(lines[j]) {
            j += 1;
        }
        if j >= lines.len() || !is_banner(lines[j]) || j == i + 1 {
            // Not a header block (e.g. two banners in a row): try again from the next banner.
            i = j.max(i + 1);
            continue;
        }
        let title = lines[i + 1].trim_start_matches('#').trim();
        let mut end = j + 1;
        while end < lines.len() && !is_banner(lines[end]) {
            end += 1;
        }
        let mut body: Vec<&str> = lines[j + 1..end].to_vec();
        while body.last().is_some_and(|l| l.trim().is_empty()) {
            body.pop();
        }
        out.push(Section { title, body });
        i = end;
    }
    out
}

/// The body of the section titled `key` or `key (…)`.
fn find_section<'a>(capture: &'a str, key: &str) -> Option<Vec<&'a str>> {
    sections(capture)
        .into_iter()
        .find(|s| {
            s.title == key
                || s.title
                    .strip_prefix(key)
                    .is_some_and(|rest| rest.starts_with(" ("))
        })
        .map(|s| s.body)
}

/// A section body printed verbatim.
fn verbatim(capture: &str, key: &str) -> Answer {
    match find_section(capture, key) {
        Some(body) => {
            let mut text = body.join("\n");
            if !text.is_empty() {
                text.push('\n');
            }
            Answer::ok(text)
        }
        None => Answer::capture_problem(format!("the capture has no section '{key}'")),
    }
}

// ---------------------------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct Request {
    query_gpu: Option<String>,
    query_apps: Option<String>,
    format: Option<String>,
    ids: Option<String>,
    query: bool,
    list: bool,
    version: bool,
    help: bool,
    help_query_gpu: bool,
    help_query_apps: bool,
}

fn bad_arguments() -> Answer {
    Answer::usage(
        "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n".to_owned(),
    )
}

fn parse_args(args: &[String]) -> Option<Request> {
    let mut req = Request::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |inline: Option<String>| inline.or_else(|| it.next().cloned());
        match flag {
            "--query-gpu" => req.query_gpu = Some(value(inline)?),
            "--query-compute-apps" => req.query_apps = Some(value(inline)?),
            "--format" => req.format = Some(value(inline)?),
            "-i" | "--id" => req.ids = Some(value(inline)?),
            "-d" | "--display" => {
                value(inline)?;
            }
            "-q" | "--query" => req.query = true,
            "-L" | "--list-gpus" => req.list = true,
            "--version" => req.version = true,
            "-h" | "--help" => req.help = true,
            "--help-query-gpu" => req.help_query_gpu = true,
            "--help-query-compute-apps" => req.help_query_apps = true,
            _ => return None,
        }
    }
    Some(req)
}

/// nvidia-smi's sentence for GPU 2, which it cannot reach.
fn lost_line() -> String {
    let (bus, _) = lost_mode_ids(2);
    format!(
        "Unable to determine the device handle for GPU {}: GPU is lost.  Reboot the system to \
         recover this GPU",
        bus.get(4..).unwrap_or(&bus)
    )
}

/// The PCI bus id and UUID of fake GPU `i` in `lost-gpu` mode.
fn lost_mode_ids(i: usize) -> (String, String) {
    (
        format!("00000000:{:02X}:00.0", 0x18 + 0x22 * i),
        format!("GPU-fa4e0000-0000-4000-8000-00000000000{i}"),
    )
}

/// The capture's first GPU as GPUs 0 to 3; every process on GPU 3.
fn four_gpus(table: &mut Table, query_gpu: bool) {
    let set = |t: &Table, row: &mut Vec<String>, field: &str, value: &str| {
        if let Some(cell) = t.column(field, &[]).and_then(|c| row.get_mut(c)) {
            *cell = value.to_owned();
        }
    };
    if query_gpu {
        let Some(first) = table.rows.first().cloned() else {
            return;
        };
        let rows: Vec<Vec<String>> = (0..4)
            .map(|i| {
                let mut row = first.clone();
                let (bus, uuid) = lost_mode_ids(i);
                set(table, &mut row, "index", &i.to_string());
                set(table, &mut row, "pci.bus_id", &bus);
                set(table, &mut row, "uuid", &uuid);
                row
            })
            .collect();
        table.rows = rows;
    } else {
        let (bus, uuid) = lost_mode_ids(3);
        let mut rows = std::mem::take(&mut table.rows);
        for row in &mut rows {
            set(table, row, "gpu_bus_id", &bus);
            set(table, row, "gpu_uuid", &uuid);
        }
        table.rows = rows;
    }
}

/// GPU 2's row replaced by nvidia-smi's sentence (before the process list, for that query), and
/// the exit status nvidia-smi gives then.
fn lose_gpu(args: &[String], a: Answer) -> Answer {
    let query_gpu = args.iter().any(|x| x.starts_with("--query-gpu"));
    let header =
        args.iter().any(|x| x.contains("csv")) && !args.iter().any(|x| x.contains("noheader"));
    let mut lines: Vec<String> = a.stdout.lines().map(str::to_owned).collect();
    let at = usize::from(header) + 2;
    if query_gpu && lines.len() > at {
        lines[at] = lost_line();
    } else if !query_gpu {
        lines.insert(usize::from(header), lost_line());
    }
    let mut stdout = lines.join("\n");
    stdout.push('\n');
    Answer {
        stdout,
        stderr: a.stderr,
        code: 15,
    }
}

fn answer(
    args: &[String],
    capture: &str,
    phase: &str,
    rejected: &[&str],
    lost_gpu: bool,
) -> Answer {
    let Some(req) = parse_args(args) else {
        return bad_arguments();
    };
    if req.help {
        return verbatim(capture, "capabilities :: help");
    }
    if req.help_query_gpu {
        return verbatim(capture, "capabilities :: help-query-gpu");
    }
    if req.help_query_apps {
        return verbatim(capture, "capabilities :: help-query-compute-apps");
    }
    if req.version {
        return verbatim(capture, "capabilities :: version");
    }
    if req.list {
        return verbatim(capture, "capabilities :: list");
    }
    if let Some(fields) = &req.query_gpu {
        let Some(format) = req.format.as_deref().and_then(Format::parse) else {
            return bad_arguments();
        };
        let key = format!("{phase} :: query-gpu");
        let Some(body) = find_section(capture, &key) else {
            return Answer::capture_problem(format!("the capture has no section '{key}'"));
        };
        let mut table = Table::parse(&body);
        if lost_gpu {
            four_gpus(&mut table, true);
        }
        let keep = req.ids.as_deref().map(|ids| table.gpu_filter(ids));
        return table.query(fields, format, GPU_ALIASES, rejected, keep.as_deref());
    }
    if let Some(fields) = &req.query_apps {
        let Some(format) = req.format.as_deref().and_then(Format::parse) else {
            return bad_arguments();
        };
        let key = format!("{phase} :: query-compute-apps");
        let Some(body) = find_section(capture, &key) else {
            return Answer::capture_problem(format!("the capture has no section '{key}'"));
        };
        let mut table = Table::parse(&body);
        if lost_gpu {
            four_gpus(&mut table, false);
        }
        let keep = match req.ids.as_deref() {
            Some(ids) => {
                // Map the selected GPUs to their UUIDs through the query-gpu section.
                let gpus = find_section(capture, &format!("{phase} :: query-gpu"))
                    .map(|b| Table::parse(&b))
                    .unwrap_or_default();
                let uuids: Vec<String> = gpus
                    .gpu_filter(ids)
                    .iter()
                    .filter_map(|&r| gpus.cell(r, "uuid").map(str::to_owned))
                    .collect();
                Some(
                    (0..table.rows.len())
                        .filter(|&r| {
                            table
                                .cell(r, "gpu_uuid")
                                .is_some_and(|u| uuids.iter().any(|x| x == u))
                        })
                        .collect::<Vec<_>>(),
                )
            }
            None => None,
        };
        return table.query(fields, format, APP_ALIASES, rejected, keep.as_deref());
    }
    if req.query {
        return verbatim(capture, &format!("{phase} :: query"));
    }
    if req.format.is_some() {
        return bad_arguments();
    }
    // No arguments (or only `-i`): the default table, as captured.
    verbatim(capture, &format!("{phase} :: nvidia-smi"))
}

// ---------------------------------------------------------------------------------------------
// CSV queries
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct Format {
    header: bool,
    units: bool,
}

impl Format {
    fn parse(text: &str) -> Option<Self> {
        let mut csv = false;
        let mut format = Self {
            header: true,
            units: true,
        };
        for token in text.split(',').map(str::trim) {
            match token {
                "csv" => csv = true,
                "noheader" => format.header = false,
                "nounits" => format.units = false,
                _ => return None,
            }
        }
        csv.then_some(format)
    }
}

/// A captured CSV answer: header cells (with units) and rows of cells.
#[derive(Default)]
struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

/// The field name of a header cell: `memory.total [MiB]` → `memory.total`.
fn field_name(header_cell: &str) -> &str {
    match header_cell.rfind(" [") {
        Some(i) if header_cell.ends_with(']') => &header_cell[..i],
        _ => header_cell,
    }
}

/// A value without its unit: `538 MiB` → `538`; anything not `<number> <unit>` is unchanged
/// (so `[N/A]` and names like `NVIDIA GeForce RTX 2080 SUPER` stay as they are).
fn strip_unit(value: &str) -> &str {
    if let Some((number, unit)) = value.split_once(' ')
        && number.parse::<f64>().is_ok()
        && !unit.is_empty()
        && !unit.contains(' ')
        && !unit.starts_with('[')
    {
        return number;
    }
    value
}

impl Table {
    fn parse(body: &[&str]) -> Self {
        let mut lines = body.iter().filter(|l| !l.trim().is_empty());
        let split = |l: &str| -> Vec<String> { l.split(", ").map(str::to_owned).collect() };
        let header = lines.next().map(|l| split(l)).unwrap_or_default();
        let rows = lines.map(|l| split(l)).collect();
        Self { header, rows }
    }

    fn column(&self, field: &str, aliases: &[(&str, &str)]) -> Option<usize> {
        let field = field.trim();
        let find = |name: &str| {
            self.header
                .iter()
                .position(|h| field_name(h) == name)
                .or_else(|| {
                    self.header
                        .iter()
                        .position(|h| field_name(h).eq_ignore_ascii_case(name))
                })
        };
        find(field).or_else(|| {
            aliases
                .iter()
                .find(|(alias, _)| alias.eq_ignore_ascii_case(field))
                .and_then(|(_, canonical)| find(canonical))
        })
    }

    fn cell(&self, row: usize, field: &str) -> Option<&str> {
        let c = self.column(field, &[])?;
        self.rows.get(row)?.get(c).map(String::as_str)
    }

    /// Rows of a query-gpu table selected by `-i` (comma-separated indexes, UUIDs or bus ids).
    fn gpu_filter(&self, ids: &str) -> Vec<usize> {
        let wanted: Vec<&str> = ids.split(',').map(str::trim).collect();
        (0..self.rows.len())
            .filter(|&r| {
                ["index", "uuid", "pci.bus_id"].iter().any(|f| {
                    self.cell(r, f)
                        .is_some_and(|v| wanted.iter().any(|w| w.eq_ignore_ascii_case(v)))
                })
            })
            .collect()
    }

    fn query(
        &self,
        fields: &str,
        format: Format,
        aliases: &[(&str, &str)],
        rejected: &[&str],
        keep: Option<&[usize]>,
    ) -> Answer {
        let mut columns = Vec::new();
        for field in fields.split(',') {
            let column = if rejected.contains(&field.trim()) {
                None
            } else {
                self.column(field, aliases)
            };
            match column {
                Some(c) => columns.push(c),
                None => {
                    return Answer::usage(format!(
                        "Field \"{}\" is not a valid field to query.\n\nRun 'nvidia-smi --help' for usage.\n",
                        field.trim()
                    ));
                }
            }
        }
        let mut out = String::new();
        if format.header {
            let cells: Vec<&str> = columns
                .iter()
                .map(|&c| {
                    let cell = self.header.get(c).map_or("", String::as_str);
                    if format.units { cell } else { field_name(cell) }
                })
                .collect();
            out.push_str(&cells.join(", "));
            out.push('\n');
        }
        for (r, row) in self.rows.iter().enumerate() {
            if keep.is_some_and(|k| !k.contains(&r)) {
                continue;
            }
            let cells: Vec<&str> = columns
                .iter()
                .map(|&c| {
                    let cell = row.get(c).map_or("", String::as_str);
                    if format.units { cell } else { strip_unit(cell) }
                })
                .collect();
            out.push_str(&cells.join(", "));
            out.push('\n');
        }
        Answer::ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPTURE: &str = "\
################################################################################
# preamble
################################################################################
collected_at: now


################################################################################
# load :: query-gpu (csv, what the exporter parses)
# $ nvidia-smi --query-gpu=index,name,memory.total --format=csv
################################################################################
index, name, memory.total [MiB], memory.reserved [MiB]
0, NVIDIA GeForce RTX 2080 SUPER, 8192 MiB, [N/A]


################################################################################
# load :: pmon (per-process monitor)
# $ nvidia-smi pmon -c 5
################################################################################
# gpu   pid
    0   123
";

    #[test]
    fn sections_and_queries() {
        let s = sections(CAPTURE);
        assert_eq!(s.len(), 3);
        assert_eq!(s[2].body, vec!["# gpu   pid", "    0   123"]);
        let a = answer(
            &[
                "--query-gpu=memory.total,name,memory.reserved".to_owned(),
                "--format=csv,noheader,nounits".to_owned(),
            ],
            CAPTURE,
            "load",
            &[],
            false,
        );
        assert_eq!(a.code, 0);
        assert_eq!(a.stdout, "8192, NVIDIA GeForce RTX 2080 SUPER, [N/A]\n");
        let a = answer(
            &[
                "--query-gpu".to_owned(),
                "gpu_name,memory.total".to_owned(),
                "--format".to_owned(),
                "csv".to_owned(),
            ],
            CAPTURE,
            "load",
            &[],
            false,
        );
        assert_eq!(
            a.stdout,
            "name, memory.total [MiB]\nNVIDIA GeForce RTX 2080 SUPER, 8192 MiB\n"
        );
        let a = answer(
            &[
                "--query-gpu=memory.reserved".to_owned(),
                "--format=csv".to_owned(),
            ],
            CAPTURE,
            "load",
            &["memory.reserved"],
            false,
        );
        assert_eq!(a.code, 2);
        assert!(
            a.stdout
                .starts_with("Field \"memory.reserved\" is not a valid field")
        );
    }

    #[test]
    fn modes_and_cuts() {
        assert_eq!(Mode::parse("sleep-ms:25"), Some(Mode::SleepMs(25)));
        assert_eq!(Mode::parse("bogus"), None);
        assert_eq!(Mode::parse("reject-mig"), Some(Mode::RejectMig));
        assert_eq!(cut_last_line("a, b\n1234, 5678\n"), "a, b\n1234,");
        assert_eq!(strip_unit("538 MiB"), "538");
        assert_eq!(strip_unit("[N/A]"), "[N/A]");
        assert_eq!(
            strip_unit("2026/07/03 08:33:38.737"),
            "2026/07/03 08:33:38.737"
        );
    }
}
