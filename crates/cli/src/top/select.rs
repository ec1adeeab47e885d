//! The selected row of `hmn top` and the rows in view: moved by keys and the mouse, kept on its
//! process (by pid and start time) across refreshes and re-sorts, and always in view.

use super::model::Proc;
use super::state::{Nav, Pick, ViewState};

/// Which rows the table shows: the first, how many, and of how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Window {
    pub first: usize,
    pub shown: usize,
    pub total: usize,
}

/// How many rows fit in a table `height` lines high for `total` rows: a line for the header,
/// and one for "rows a–b of n" when they do not all fit.
pub fn rows_in_view(height: usize, total: usize) -> usize {
    let room = height.saturating_sub(1);
    if total <= room {
        room
    } else {
        room.saturating_sub(1)
    }
}

impl ViewState {
    /// After a refresh or a change of order or filter: the selection on its process where it
    /// is still listed, else on the row where it was; then in view. `height` is the table's.
    pub fn follow(&mut self, procs: &[Proc], height: usize) {
        let rows = self.rows(procs);
        if rows.is_empty() {
            self.cursor = 0;
            self.top = 0;
            return;
        }
        let found = self
            .selected
            .and_then(|s| rows.iter().position(|p| s.is(p)));
        self.cursor = found.unwrap_or_else(|| self.cursor.min(rows.len() - 1));
        self.selected = rows.get(self.cursor).map(|p| Pick::of(p));
        self.scroll_into_view(rows.len(), height);
    }

    /// Moves the selection; `height` is the table's.
    pub fn navigate(&mut self, nav: Nav, procs: &[Proc], height: usize) {
        let rows = self.rows(procs);
        if rows.is_empty() {
            return;
        }
        let last = rows.len() - 1;
        let page = rows_in_view(height, rows.len()).saturating_sub(1).max(1);
        // A page moves the view and the selection alike, as far as the rows go.
        match nav {
            Nav::PageUp => self.top = self.top.saturating_sub(page),
            Nav::PageDown => self.top = self.top.saturating_add(page),
            _ => {}
        }
        self.cursor = match nav {
            Nav::Up(n) => self.cursor.saturating_sub(n),
            Nav::Down(n) => self.cursor.saturating_add(n).min(last),
            Nav::PageUp => self.cursor.saturating_sub(page),
            Nav::PageDown => self.cursor.saturating_add(page).min(last),
            Nav::Home => 0,
            Nav::End => last,
            Nav::InView(i) => self.top.saturating_add(i).min(last),
        };
        self.selected = rows.get(self.cursor).map(|p| Pick::of(p));
        self.scroll_into_view(rows.len(), height);
    }

    /// `top` moved the least that puts the selection in view.
    fn scroll_into_view(&mut self, total: usize, height: usize) {
        let shown = rows_in_view(height, total).max(1);
        if self.cursor < self.top {
            self.top = self.cursor;
        } else if self.cursor >= self.top + shown {
            self.top = self.cursor + 1 - shown;
        }
        self.top = self.top.min(total.saturating_sub(shown));
    }

    /// The rows in view of `total` in a table `height` lines high.
    pub fn window(&self, total: usize, height: usize) -> Window {
        let shown = rows_in_view(height, total).min(total.saturating_sub(self.top));
        Window {
            first: self.top.min(total),
            shown,
            total,
        }
    }

    /// The selected process among `procs`, where it is listed.
    pub fn selected_proc<'a>(&self, procs: &'a [Proc]) -> Option<&'a Proc> {
        let s = self.selected?;
        procs.iter().find(|p| s.is(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::top::model::Proc;
    use crate::top::state::Column;

    fn procs(n: u32) -> Vec<Proc> {
        (1..=n)
            .map(|pid| {
                let mut p = Proc::bare(pid);
                p.gpu.insert(0, u64::from(pid));
                p.start = Some(u64::from(pid) * 10);
                p
            })
            .collect()
    }

    #[test]
    fn keys_move_the_selection_and_the_view_follows_it() {
        let all = procs(100);
        let mut s = ViewState::default();
        s.sort_by(Column::Pid);
        // A table 12 lines high: the header, 10 rows, "rows a–b of 100".
        s.follow(&all, 12);
        assert_eq!(
            (s.cursor, s.top, s.selected.map(|p| p.pid)),
            (0, 0, Some(1))
        );
        assert_eq!(
            s.window(100, 12),
            Window {
                first: 0,
                shown: 10,
                total: 100
            }
        );
        s.navigate(Nav::Down(1), &all, 12);
        assert_eq!((s.cursor, s.top), (1, 0));
        s.navigate(Nav::PageDown, &all, 12);
        assert_eq!(
            (s.cursor, s.top),
            (10, 9),
            "a page is the rows in view less one"
        );
        s.navigate(Nav::End, &all, 12);
        assert_eq!(
            (s.cursor, s.top, s.selected.map(|p| p.pid)),
            (99, 90, Some(100))
        );
        assert_eq!(s.window(100, 12).first + s.window(100, 12).shown, 100);
        s.navigate(Nav::Down(5), &all, 12);
        assert_eq!(s.cursor, 99, "stays on the last");
        s.navigate(Nav::PageUp, &all, 12);
        assert_eq!(
            (s.cursor, s.top),
            (90, 81),
            "the view a page up, the selection with it"
        );
        s.navigate(Nav::Up(1), &all, 12);
        assert_eq!((s.cursor, s.top), (89, 81));
        s.navigate(Nav::InView(3), &all, 12);
        assert_eq!(
            s.selected.map(|p| p.pid),
            Some(85),
            "the fourth row in view"
        );
        s.navigate(Nav::Home, &all, 12);
        assert_eq!((s.cursor, s.top), (0, 0));
        // Everything fits: no status line, no scrolling.
        let few = procs(5);
        let mut t = ViewState::default();
        t.follow(&few, 12);
        assert_eq!(t.window(5, 12).shown, 5);
        t.navigate(Nav::End, &few, 12);
        assert_eq!(t.top, 0);
    }

    #[test]
    fn the_selection_follows_its_process_across_a_re_sort_and_a_reused_pid_is_not_it() {
        let mut all = procs(100);
        let mut s = ViewState::default();
        s.follow(&all, 12); // by GPU memory, largest first: pid 100 on top
        s.navigate(Nav::Down(2), &all, 12);
        assert_eq!(s.selected.map(|p| p.pid), Some(98));
        // Pid 98 grows to the top: the selection goes with it.
        all[97].gpu.insert(0, 1_000);
        s.follow(&all, 12);
        assert_eq!((s.cursor, s.selected.map(|p| p.pid)), (0, Some(98)));
        // Re-sorted by pid: still on 98, scrolled to it.
        s.sort_by(Column::Pid);
        s.follow(&all, 12);
        assert_eq!((s.cursor, s.selected.map(|p| p.pid)), (97, Some(98)));
        assert!(s.top <= 97 && 97 < s.top + 10, "in view: top {}", s.top);
        // Pid 98 exits and a new process takes its pid: not the one selected. The selection
        // stays on the row where it was, now the new process.
        all[97].start = Some(5);
        s.follow(&all, 12);
        assert_eq!(
            s.selected,
            Some(Pick {
                pid: 98,
                start: Some(5)
            })
        );
        // A process that is gone from the list: the row where it was.
        all.remove(97);
        s.follow(&all, 12);
        assert_eq!(s.selected.map(|p| p.pid), Some(99));
        assert!(s.selected_proc(&all).is_some());
        // Nothing listed: nothing selected to act on, and no panic moving.
        s.follow(&[], 12);
        s.navigate(Nav::End, &[], 12);
        assert_eq!((s.cursor, s.top), (0, 0));
    }
}
