//! The view's own state (sort, filter, pause, the picked GPU, help) and what each key does to
//! it. No terminal here: keys come in as crossterm events, tests make them by hand.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::model::{Change, Proc};
use crate::view::groups::{GroupBy, Key, key_from};

/// A process as it was when selected: its pid, and its start time (clock ticks after boot)
/// where it could be read, which tells it from a later process that reuses the pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    pub pid: u32,
    pub start: Option<u64>,
}

impl Pick {
    pub fn of(p: &Proc) -> Self {
        Self {
            pid: p.pid,
            start: p.start,
        }
    }

    /// Whether `p` is this process: the same pid, and the same start time where both are known.
    pub(super) fn is(&self, p: &Proc) -> bool {
        p.pid == self.pid && (self.start.is_none() || p.start.is_none() || self.start == p.start)
    }
}

/// A move of the selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Up(usize),
    Down(usize),
    /// A page up or down: the rows in view, less one.
    PageUp,
    PageDown,
    Home,
    End,
    /// The row at this position among those in view (a click).
    InView(usize),
}

/// The signals `k` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sig {
    Term,
    Int,
    Kill,
}

impl Sig {
    pub fn name(self) -> &'static str {
        match self {
            Self::Term => "SIGTERM",
            Self::Int => "SIGINT",
            Self::Kill => "SIGKILL",
        }
    }
}

/// A column of the process table, in display order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Column {
    Pid,
    User,
    Type,
    Gpu,
    Rss,
    Cpu,
    Command,
}

impl Column {
    pub const ALL: [Self; 7] = [
        Self::Pid,
        Self::User,
        Self::Type,
        Self::Gpu,
        Self::Rss,
        Self::Cpu,
        Self::Command,
    ];

    /// The column's name in the header and the help.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pid => "PID",
            Self::User => "USER",
            Self::Type => "TYPE",
            Self::Gpu => "GPU MEM",
            Self::Rss => "RSS",
            Self::Cpu => "CPU%",
            Self::Command => "COMMAND",
        }
    }

    /// Figures sort largest first, words in alphabetical order.
    fn descending_by_default(self) -> bool {
        matches!(self, Self::Gpu | Self::Rss | Self::Cpu)
    }
}

/// What the view is set to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)] // independent switches of the view
pub struct ViewState {
    pub sort: Column,
    pub descending: bool,
    /// The filter (case-insensitive, on pid, user and command); empty: none.
    pub filter: String,
    /// Whether keys are typed into the filter.
    pub editing: bool,
    pub paused: bool,
    /// The GPU picked (its processes only, its column only), `None`: all.
    pub gpu: Option<u32>,
    pub help: bool,
    /// Whether colours are used (`NO_COLOR` unset).
    pub color: bool,
    /// Rows added up per owner, pod, namespace or container (`G`), `None`: one per process.
    pub group: Option<GroupBy>,
    /// The selected process, where there is one (see `select`).
    pub selected: Option<Pick>,
    /// Its position among the rows, and the first row in view.
    pub cursor: usize,
    pub top: usize,
    /// Whether the selected process is shown in detail (Enter) instead of the table.
    pub inspect: bool,
    /// A signal about to be sent, waiting for the user's yes (`k`).
    pub confirm: Option<Confirm>,
    /// What the last action did (a signal sent, or why not), until the next key.
    pub message: Option<Result<String, String>>,
}

/// The question `k` asks before a signal goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirm {
    pub pick: Pick,
    /// Its command as the table showed it.
    pub command: String,
    pub sig: Sig,
}

impl Default for ViewState {
    fn default() -> Self {
        Self {
            sort: Column::Gpu,
            descending: true,
            filter: String::new(),
            editing: false,
            paused: false,
            gpu: None,
            help: false,
            color: true,
            group: None,
            selected: None,
            cursor: 0,
            top: 0,
            inspect: false,
            confirm: None,
            message: None,
        }
    }
}

/// What a key asks of the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing changed.
    None,
    /// The view changed: draw again.
    Redraw,
    Quit,
    /// Ctrl-Z: give the terminal back and stop, as the shell's suspend key does.
    Suspend,
    /// Move the selection (the loop knows the rows and the table's height).
    Move(Nav),
    /// Ask before signalling the selected process (the loop knows it).
    AskSignal,
    /// Send the signal the question was about.
    Send,
}

impl ViewState {
    /// Applies a key; `gpus` is how many GPUs there are to pick from.
    pub fn on_key(&mut self, key: KeyEvent, gpus: u32) -> Action {
        if key.kind == KeyEventKind::Release {
            return Action::None;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) {
            match key.code {
                KeyCode::Char('c') => return Action::Quit,
                KeyCode::Char('z') => return Action::Suspend,
                _ => {}
            }
        }
        if self.editing {
            return self.on_filter_key(key.code);
        }
        self.message = None;
        if let Some(c) = &mut self.confirm {
            return match key.code {
                KeyCode::Enter | KeyCode::Char('y') => Action::Send,
                KeyCode::Esc | KeyCode::Char('n' | 'q') => {
                    self.confirm = None;
                    Action::Redraw
                }
                KeyCode::Char('t') => {
                    c.sig = Sig::Term;
                    Action::Redraw
                }
                KeyCode::Char('i') => {
                    c.sig = Sig::Int;
                    Action::Redraw
                }
                KeyCode::Char('9' | 'K') => {
                    c.sig = Sig::Kill;
                    Action::Redraw
                }
                _ => Action::None,
            };
        }
        let nav = match key.code {
            KeyCode::Up => Some(Nav::Up(1)),
            KeyCode::Down => Some(Nav::Down(1)),
            KeyCode::PageUp => Some(Nav::PageUp),
            KeyCode::PageDown => Some(Nav::PageDown),
            KeyCode::Home => Some(Nav::Home),
            KeyCode::End => Some(Nav::End),
            _ => None,
        };
        if let Some(nav) = nav {
            return Action::Move(nav);
        }
        match key.code {
            KeyCode::Char('k') | KeyCode::F(9) => return Action::AskSignal,
            KeyCode::Enter => self.inspect = !self.inspect,
            KeyCode::Esc if self.help => self.help = false,
            KeyCode::Esc if self.inspect => self.inspect = false,
            KeyCode::Esc if !self.filter.is_empty() => self.filter.clear(),
            KeyCode::Char('q') | KeyCode::Esc => return Action::Quit,
            KeyCode::Char('?' | 'h') => self.help = !self.help,
            KeyCode::Char('/') => self.editing = true,
            KeyCode::Char('p' | ' ') => self.paused = !self.paused,
            KeyCode::Char('r') => self.descending = !self.descending,
            KeyCode::Char('>' | '.') | KeyCode::Right => self.sort_by(self.next_column(1)),
            KeyCode::Char('<' | ',') | KeyCode::Left => self.sort_by(self.next_column(-1)),
            KeyCode::Char('g') | KeyCode::Tab => self.next_gpu(gpus),
            KeyCode::Char('G') => self.group = GroupBy::next(self.group),
            KeyCode::Char('a') => self.gpu = None,
            KeyCode::Char(c @ '0'..='9') => {
                let i = c.to_digit(10).unwrap_or(0);
                if i < gpus {
                    self.gpu = Some(i);
                }
            }
            _ => return Action::None,
        }
        Action::Redraw
    }

    fn on_filter_key(&mut self, code: KeyCode) -> Action {
        if edit_filter(&mut self.filter, &mut self.editing, code) {
            Action::Redraw
        } else {
            Action::None
        }
    }

    fn next_column(&self, step: isize) -> Column {
        let n = Column::ALL.len();
        let at = Column::ALL
            .iter()
            .position(|&c| c == self.sort)
            .unwrap_or(0);
        let next = (at + n).wrapping_add_signed(step) % n;
        Column::ALL.get(next).copied().unwrap_or(Column::Gpu)
    }

    pub(crate) fn sort_by(&mut self, c: Column) {
        self.sort = c;
        self.descending = c.descending_by_default();
    }

    fn next_gpu(&mut self, gpus: u32) {
        self.gpu = match self.gpu {
            None if gpus > 0 => Some(0),
            Some(i) if i + 1 < gpus => Some(i + 1),
            _ => None,
        };
    }

    /// The rows to show, filtered and sorted: those on the picked GPU, matching the filter.
    pub fn rows<'a>(&self, procs: &'a [Proc]) -> Vec<&'a Proc> {
        let needle = self.filter.to_lowercase();
        let mut rows: Vec<&Proc> = procs
            .iter()
            .filter(|p| self.gpu.is_none_or(|g| p.gpu.contains_key(g)))
            .filter(|p| needle.is_empty() || matches(p, &needle))
            .collect();
        rows.sort_by(|a, b| {
            let order = self.compare(a, b).then(a.pid.cmp(&b.pid));
            if self.descending {
                order.reverse()
            } else {
                order
            }
        });
        rows
    }

    /// The processes whose context a refresh reads (a file or four each): the `room` rows that
    /// fit on the screen in the current order, or all of them when the order or the filter
    /// needs every context (sorting by user, RSS, CPU or command; any filter).
    pub fn wanted(&self, procs: &[Proc], room: usize) -> Vec<u32> {
        let rss_known = procs.iter().all(|p| p.rss.is_some());
        let all = !self.filter.is_empty()
            || self.group.is_some()
            || matches!(self.sort, Column::User | Column::Cpu | Column::Command)
            || (self.sort == Column::Rss && !rss_known);
        if all {
            return procs.iter().map(|p| p.pid).collect();
        }
        self.rows(procs)
            .iter()
            .skip(self.top)
            .take(room)
            .map(|p| p.pid)
            .collect()
    }

    /// Whether a refresh reads the processes' containers: to group or filter by them, or to
    /// show the selected one's in detail.
    pub fn wants_containers(&self) -> bool {
        self.group.is_some() || !self.filter.is_empty() || self.inspect
    }

    /// The groups of the rows shown (`rows`, filtered), largest GPU memory first: each with
    /// how many processes and their GPU memory and RSS added up (exited ones left out).
    pub fn groups(&self, procs: &[Proc]) -> Vec<TopGroup> {
        let Some(by) = self.group else {
            return Vec::new();
        };
        let mut sums: std::collections::BTreeMap<Key, TopGroup> = std::collections::BTreeMap::new();
        for p in self.rows(procs) {
            if p.change == Change::Gone {
                continue;
            }
            let key = key_from(
                p.outside,
                p.user.as_deref().map(str::to_owned),
                p.container.as_deref(),
                by,
            );
            let g = sums.entry(key.clone()).or_insert_with(|| TopGroup {
                key,
                processes: 0,
                gpu: 0,
                rss: Some(0),
            });
            g.processes += 1;
            g.gpu = g.gpu.saturating_add(self.gpu_bytes(p));
            g.rss = match (g.rss, p.rss) {
                (Some(a), Some(b)) => Some(a.saturating_add(b)),
                _ => None,
            };
        }
        let mut out: Vec<TopGroup> = sums.into_values().collect();
        out.sort_by(|a, b| b.gpu.cmp(&a.gpu).then_with(|| a.key.cmp(&b.key)));
        out
    }

    /// The memory of `p` the GPU column shows: on the picked GPU, else on all.
    pub fn gpu_bytes(&self, p: &Proc) -> u64 {
        match self.gpu {
            Some(g) => p.gpu.get(g).copied().unwrap_or(0),
            None => p.gpu_total(),
        }
    }

    fn compare(&self, a: &Proc, b: &Proc) -> std::cmp::Ordering {
        match self.sort {
            Column::Pid => a.pid.cmp(&b.pid),
            Column::User => a.user.cmp(&b.user),
            Column::Type => a.kind.map(|k| k as u8).cmp(&b.kind.map(|k| k as u8)),
            // Then RSS: the order of a table without GPU memory (no GPU: the host's processes).
            Column::Gpu => self
                .gpu_bytes(a)
                .cmp(&self.gpu_bytes(b))
                .then(a.rss.cmp(&b.rss)),
            Column::Rss => a.rss.cmp(&b.rss),
            Column::Cpu => a.cpu.unwrap_or(-1.0).total_cmp(&b.cpu.unwrap_or(-1.0)),
            Column::Command => a.command.cmp(&b.command),
        }
    }
}

/// One group of `hmn top`'s grouped table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopGroup {
    pub key: Key,
    pub processes: usize,
    /// GPU memory on the picked GPU, else on all.
    pub gpu: u64,
    /// Host memory added up; `None` when a process's is unknown.
    pub rss: Option<u64>,
}

/// Whether `p`'s pid, user, command, or pod's namespace or name contains `needle` (lowercase).
fn matches(p: &Proc, needle: &str) -> bool {
    let pod = p.container.as_deref();
    let lower = |v: Option<&String>| v.is_some_and(|v| v.to_lowercase().contains(needle));
    lower(pod.and_then(|c| c.namespace.as_ref()))
        || lower(pod.and_then(|c| c.pod.as_ref()))
        || p.pid.to_string().contains(needle)
        || p.user
            .as_deref()
            .is_some_and(|u| u.to_lowercase().contains(needle))
        || p.command
            .as_deref()
            .is_some_and(|c| c.to_lowercase().contains(needle))
        || (p.change == Change::Gone && "exited".contains(needle))
}

/// A key typed into a `/` filter (`hmn top`'s and its fleet view's): Enter keeps the filter,
/// Esc clears it, Backspace takes a character back, a printable one is added (64 at most).
/// Whether the key did something.
pub fn edit_filter(filter: &mut String, editing: &mut bool, code: KeyCode) -> bool {
    match code {
        KeyCode::Enter => *editing = false,
        KeyCode::Esc => {
            *editing = false;
            filter.clear();
        }
        KeyCode::Backspace => {
            filter.pop();
        }
        KeyCode::Char(c) if !c.is_control() && filter.chars().count() < 64 => filter.push(c),
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    fn proc(pid: u32, user: &str, gpu: &[(u32, u64)], command: &str) -> Proc {
        Proc {
            pid,
            user: Some(user.into()),
            kind: None,
            gpu: gpu.iter().copied().collect(),
            rss: Some(u64::from(pid)),
            cpu: None,
            command: Some(command.into()),
            outside: false,
            unreadable: None,
            mps_server: false,
            container: None,
            start: None,
            change: Change::Steady,
        }
    }

    #[test]
    fn keys_sort_filter_pause_pick_and_quit() {
        let procs = [
            proc(10, "alice", &[(0, 5), (1, 50)], "python train.py"),
            proc(20, "bob", &[(0, 30)], "python serve.py"),
            proc(30, "carol", &[(1, 10)], "llama-server"),
        ];
        let mut s = ViewState::default();
        let pids = |s: &ViewState| s.rows(&procs).iter().map(|p| p.pid).collect::<Vec<_>>();
        assert_eq!(
            pids(&s),
            [10, 20, 30],
            "GPU memory over all GPUs, largest first"
        );
        assert_eq!(s.on_key(key(KeyCode::Char('0')), 2), Action::Redraw);
        assert_eq!(pids(&s), [20, 10], "GPU 0 only, by its memory");
        assert_eq!(s.on_key(key(KeyCode::Char('7')), 2), Action::Redraw);
        assert_eq!(s.gpu, Some(0), "no GPU 7");
        s.on_key(key(KeyCode::Tab), 2);
        assert_eq!(pids(&s), [10, 30]);
        s.on_key(key(KeyCode::Char('g')), 2);
        assert_eq!(s.gpu, None, "after the last GPU, all again");
        s.on_key(key(KeyCode::Char('<')), 2);
        assert_eq!((s.sort, s.descending), (Column::Type, false));
        s.on_key(key(KeyCode::Char('<')), 2);
        s.on_key(key(KeyCode::Char('<')), 2);
        assert_eq!((s.sort, s.descending), (Column::Pid, false));
        assert_eq!(pids(&s), [10, 20, 30]);
        s.on_key(key(KeyCode::Char('r')), 2);
        assert_eq!(pids(&s), [30, 20, 10]);
        s.on_key(key(KeyCode::Left), 2);
        assert_eq!(s.sort, Column::Command, "wraps around");
        s.on_key(key(KeyCode::Right), 2);
        assert_eq!(s.sort, Column::Pid);
        s.on_key(key(KeyCode::Char('/')), 2);
        for c in "PYTHON".chars() {
            s.on_key(key(KeyCode::Char(c)), 2);
        }
        assert_eq!(
            s.on_key(key(KeyCode::Char('q')), 2),
            Action::Redraw,
            "typed, not quit"
        );
        s.on_key(key(KeyCode::Backspace), 2);
        s.on_key(key(KeyCode::Enter), 2);
        assert_eq!((s.filter.as_str(), s.editing), ("PYTHON", false));
        assert_eq!(pids(&s), [10, 20]);
        s.on_key(key(KeyCode::Char('/')), 2);
        assert_eq!(s.on_key(key(KeyCode::Esc), 2), Action::Redraw);
        assert_eq!(
            (s.filter.as_str(), s.editing),
            ("", false),
            "Esc while typing clears"
        );
        s.on_key(key(KeyCode::Char('/')), 2);
        s.on_key(key(KeyCode::Char('b')), 2);
        s.on_key(key(KeyCode::Enter), 2);
        assert_eq!(pids(&s), [20], "matches the user");
        assert_eq!(s.on_key(key(KeyCode::Esc), 2), Action::Redraw);
        assert_eq!(s.filter, "", "Esc clears the filter first");
        s.on_key(key(KeyCode::Char('p')), 2);
        assert!(s.paused);
        s.on_key(key(KeyCode::Char(' ')), 2);
        assert!(!s.paused);
        s.on_key(key(KeyCode::Char('?')), 2);
        assert!(s.help);
        assert_eq!(
            s.on_key(key(KeyCode::Esc), 2),
            Action::Redraw,
            "closes the help"
        );
        assert_eq!(s.on_key(key(KeyCode::F(5)), 2), Action::None);
        assert_eq!(s.on_key(key(KeyCode::Esc), 2), Action::Quit);
        assert_eq!(s.on_key(key(KeyCode::Char('q')), 2), Action::Quit);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        s.editing = true;
        assert_eq!(s.on_key(ctrl_c, 2), Action::Quit, "even while typing");
        let ctrl_z = KeyEvent::new(KeyCode::Char('z'), KeyModifiers::CONTROL);
        assert_eq!(s.on_key(ctrl_z, 2), Action::Suspend, "even while typing");
        assert!(s.editing, "and the filter is kept");
    }

    #[test]
    fn a_refresh_reads_the_contexts_of_the_rows_it_shows() {
        let procs: Vec<Proc> = (1..=50)
            .map(|i| proc(i, "u", &[(0, u64::from(i))], "c"))
            .collect();
        let mut s = ViewState::default();
        assert_eq!(s.wanted(&procs, 3), [50, 49, 48], "the largest three");
        s.sort_by(Column::Pid);
        assert_eq!(s.wanted(&procs, 2), [1, 2]);
        s.gpu = Some(1);
        assert!(s.wanted(&procs, 2).is_empty(), "none on GPU 1");
        s.gpu = None;
        for c in [Column::User, Column::Cpu, Column::Command] {
            s.sort_by(c);
            assert_eq!(s.wanted(&procs, 2).len(), 50, "{c:?} needs every context");
        }
        s.sort_by(Column::Gpu);
        s.filter = "x".into();
        assert_eq!(
            s.wanted(&procs, 2).len(),
            50,
            "a filter needs every context"
        );
    }

    #[test]
    fn sorting_by_every_column_is_total() {
        let mut procs = vec![proc(1, "b", &[(0, 1)], "z"), proc(2, "a", &[(0, 1)], "y")];
        procs[0].cpu = Some(5.0);
        let mut s = ViewState::default();
        for c in Column::ALL {
            s.sort_by(c);
            let rows = s.rows(&procs);
            assert_eq!(rows.len(), 2, "{c:?}");
        }
        s.sort_by(Column::User);
        assert_eq!(s.rows(&procs)[0].pid, 2);
        s.sort_by(Column::Cpu);
        assert_eq!(
            s.rows(&procs)[0].pid,
            1,
            "a known share before an unknown one"
        );
        s.sort_by(Column::Rss);
        assert_eq!(s.rows(&procs)[0].pid, 2);
        s.sort_by(Column::Command);
        assert_eq!(s.rows(&procs)[0].pid, 2);
    }
}
