//! The fleet view's state: the latest refresh, the sort, the `/` filter, the selected node and
//! the node open, and what each key does to them (the keys of `hmn top` where they mean the
//! same).

use std::cmp::Ordering;

use hypomnesis_fleet::Node;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::super::state::edit_filter;
use super::fetch::Snapshot;

/// The node table's columns, in order: each sorts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    Node,
    Gpus,
    Used,
    Total,
    Share,
    Reserved,
    Ghosts,
    Pod,
    Age,
}

impl Column {
    pub const ALL: [Self; 9] = [
        Self::Node,
        Self::Gpus,
        Self::Used,
        Self::Total,
        Self::Share,
        Self::Reserved,
        Self::Ghosts,
        Self::Pod,
        Self::Age,
    ];

    /// Its heading.
    pub fn title(self) -> &'static str {
        match self {
            Self::Node => "NODE",
            Self::Gpus => "GPUS",
            Self::Used => "USED",
            Self::Total => "TOTAL",
            Self::Share => "USE%",
            Self::Reserved => "RESERVED",
            Self::Ghosts => "GHOSTS",
            Self::Pod => "LARGEST POD",
            Self::Age => "AGE",
        }
    }
}

/// What a key asks of the view's loop.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Nothing,
    Redraw,
    /// Open this node (its GPUs, pods and processes), or go back with `None`.
    Open(Option<Box<Node>>),
    /// Ctrl-Z: give the terminal back and stop, as the shell's suspend key does.
    Suspend,
    Quit,
}

/// The fleet view.
#[derive(Debug)]
pub struct View {
    /// The Prometheus server's address, to show.
    pub url: String,
    /// The latest refresh (the last good nodes are kept when a refresh fails: `error` says so).
    pub last: Option<Snapshot>,
    /// Why the latest refresh failed, if it did.
    pub error: Option<String>,
    pub sort: Column,
    pub descending: bool,
    pub filter: String,
    pub editing: bool,
    /// The selected node's name (kept across refreshes).
    pub selected: Option<String>,
    /// The node open, if any.
    pub open: Option<Node>,
    /// The first line shown of the open node's lines, or of the table's rows.
    pub scroll: usize,
    /// Rows the table shows at once (set when drawn).
    pub page: usize,
    pub color: bool,
}

impl View {
    pub fn new(url: &str, color: bool) -> Self {
        Self {
            url: url.to_string(),
            last: None,
            error: None,
            sort: Column::Used,
            descending: true,
            filter: String::new(),
            editing: false,
            selected: None,
            open: None,
            scroll: 0,
            page: 20,
            color,
        }
    }

    /// Takes a refresh. One whose nodes could not be read keeps the last good nodes shown, with
    /// its error.
    pub fn take(&mut self, mut s: Snapshot) {
        match &s.nodes {
            Ok(_) => self.error = None,
            Err(e) => {
                self.error = Some(e.clone());
                if let Some(last) = self.last.take() {
                    s.nodes = last.nodes;
                }
            }
        }
        // An answer about a node no longer open is not shown.
        if s.detail.as_ref().map(|d| &d.node.target) != self.open.as_ref().map(|n| &n.target) {
            s.detail = None;
        }
        self.last = Some(s);
    }

    /// The nodes the table shows: those the filter keeps, sorted.
    pub fn rows(&self) -> Vec<&Node> {
        let Some(Ok(nodes)) = self.last.as_ref().map(|s| &s.nodes) else {
            return Vec::new();
        };
        let needle = self.filter.to_lowercase();
        let mut rows: Vec<&Node> = nodes
            .nodes
            .iter()
            .filter(|n| needle.is_empty() || haystack(n).contains(&needle))
            .collect();
        rows.sort_by(|a, b| {
            let o = compare(self.sort, a, b);
            let o = if self.descending { o.reverse() } else { o };
            o.then_with(|| a.name.cmp(&b.name))
        });
        rows
    }

    /// The selected row's index in `rows`.
    pub fn selected_index(&self, rows: &[&Node]) -> usize {
        self.selected
            .as_ref()
            .and_then(|name| rows.iter().position(|n| &n.name == name))
            .unwrap_or(0)
    }

    /// Does what `key` asks.
    pub fn on_key(&mut self, key: KeyEvent) -> Action {
        if key.modifiers.contains(KeyModifiers::CONTROL) {
            return match key.code {
                KeyCode::Char('c') => Action::Quit,
                KeyCode::Char('z') => Action::Suspend,
                _ => Action::Nothing,
            };
        }
        if self.editing {
            return if edit_filter(&mut self.filter, &mut self.editing, key.code) {
                Action::Redraw
            } else {
                Action::Nothing
            };
        }
        if self.open.is_some() {
            return self.on_node_key(key.code);
        }
        let moved = match key.code {
            KeyCode::Up | KeyCode::Char('k') => Some(Move::By(-1)),
            KeyCode::Down | KeyCode::Char('j') => Some(Move::By(1)),
            KeyCode::PageUp => Some(Move::By(-page(self.page))),
            KeyCode::PageDown => Some(Move::By(page(self.page))),
            KeyCode::Home => Some(Move::To(0)),
            KeyCode::End => Some(Move::ToEnd),
            _ => None,
        };
        if let Some(m) = moved {
            let rows = self.rows();
            let at = self.selected_index(&rows);
            let to = match m {
                Move::By(n) => at.saturating_add_signed(n),
                Move::To(i) => i,
                Move::ToEnd => rows.len().saturating_sub(1),
            };
            let name = rows
                .get(to.min(rows.len().saturating_sub(1)))
                .map(|n| n.name.clone());
            self.selected = name;
            return Action::Redraw;
        }
        match key.code {
            KeyCode::Enter => {
                let rows = self.rows();
                let node = rows.get(self.selected_index(&rows)).map(|n| (*n).clone());
                if let Some(node) = node {
                    self.open = Some(node.clone());
                    self.scroll = 0;
                    return Action::Open(Some(Box::new(node)));
                }
                return Action::Nothing;
            }
            KeyCode::Esc if !self.filter.is_empty() => self.filter.clear(),
            KeyCode::Char('q') | KeyCode::Esc => return Action::Quit,
            KeyCode::Char('/') => self.editing = true,
            KeyCode::Char('r') => self.descending = !self.descending,
            KeyCode::Char('>' | '.') | KeyCode::Right => self.sort_by(1),
            KeyCode::Char('<' | ',') | KeyCode::Left => self.sort_by(-1),
            _ => return Action::Nothing,
        }
        Action::Redraw
    }

    fn on_node_key(&mut self, code: KeyCode) -> Action {
        match code {
            KeyCode::Esc | KeyCode::Backspace | KeyCode::Left => {
                self.open = None;
                self.scroll = 0;
                Action::Open(None)
            }
            KeyCode::Char('q') => Action::Quit,
            KeyCode::Up | KeyCode::Char('k') => {
                self.scroll = self.scroll.saturating_sub(1);
                Action::Redraw
            }
            KeyCode::Down | KeyCode::Char('j') => {
                self.scroll = self.scroll.saturating_add(1);
                Action::Redraw
            }
            KeyCode::PageUp => {
                self.scroll = self.scroll.saturating_sub(self.page.max(1));
                Action::Redraw
            }
            KeyCode::PageDown => {
                self.scroll = self.scroll.saturating_add(self.page.max(1));
                Action::Redraw
            }
            KeyCode::Home => {
                self.scroll = 0;
                Action::Redraw
            }
            _ => Action::Nothing,
        }
    }

    /// Sorts by the column `step` places on (a new column starts in its natural order: names
    /// A to Z, the rest largest first).
    fn sort_by(&mut self, step: isize) {
        let at = Column::ALL
            .iter()
            .position(|c| *c == self.sort)
            .unwrap_or(0);
        let n = Column::ALL.len();
        let to = (at + n).saturating_add_signed(step) % n;
        self.sort = Column::ALL.get(to).copied().unwrap_or(Column::Node);
        self.descending = self.sort != Column::Node;
    }
}

/// A move of the selection: the rows are sorted once for it (a key held down over a thousand
/// nodes sorts them once a press).
enum Move {
    By(isize),
    To(usize),
    ToEnd,
}

fn page(rows: usize) -> isize {
    isize::try_from(rows.max(1)).unwrap_or(1)
}

/// What the filter looks in: the node's name, its source and its largest pod.
fn haystack(n: &Node) -> String {
    let pod = n
        .largest_pod
        .as_ref()
        .map(|p| format!("{}/{}", p.namespace, p.pod))
        .unwrap_or_default();
    format!("{} {} {pod}", n.name, n.source.as_str()).to_lowercase()
}

/// The share of a node's memory in use, in thousandths (for sorting).
pub fn share(n: &Node) -> Option<u64> {
    let total = n.total.filter(|t| *t > 0)?;
    Some(u64::try_from(u128::from(n.used()?) * 1000 / u128::from(total)).unwrap_or(u64::MAX))
}

/// `a` against `b` by `column`; an unknown figure sorts below every known one.
fn compare(column: Column, a: &Node, b: &Node) -> Ordering {
    let pod = |n: &Node| {
        n.largest_pod
            .as_ref()
            .map(|p| (p.bytes, format!("{}/{}", p.namespace, p.pod)))
    };
    match column {
        Column::Node => a.name.cmp(&b.name),
        Column::Gpus => a.gpus.cmp(&b.gpus),
        Column::Used => a.used().cmp(&b.used()),
        Column::Total => a.total.cmp(&b.total),
        Column::Share => share(a).cmp(&share(b)),
        Column::Reserved => a.reserved.cmp(&b.reserved),
        Column::Ghosts => a.ghosts.cmp(&b.ghosts),
        Column::Pod => pod(a).cmp(&pod(b)),
        Column::Age => a
            .age
            .partial_cmp(&b.age)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.stale.cmp(&b.stale)),
    }
}
