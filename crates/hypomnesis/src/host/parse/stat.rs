//! The one parser of `/proc/<pid>/stat`. Field 2, the command name, may hold spaces and
//! parentheses, so every field is counted after its last `)`: [`fields`] does that once and the
//! readers below take the field they need by the number `proc(5)` gives it.

/// The text of a `stat` line after the command name, split only when a field is asked for
/// (a reader wants two to four of its fifty-odd fields, many times a second).
struct Fields<'a>(&'a str);

/// The fields after the name, `fields(text)?.get(n)` being field `n` of `proc(5)` (3: state,
/// 4: ppid, 14: utime, 15: stime, 22: starttime); `None` without a `)`.
fn fields(text: &str) -> Option<Fields<'_>> {
    text.get(text.rfind(')')? + 1..).map(Fields)
}

impl<'a> Fields<'a> {
    /// Field `n` as `proc(5)` numbers them (3 and up). The kernel separates them by single
    /// spaces; any run of ASCII white space is taken as one.
    fn get(&self, n: usize) -> Option<&'a str> {
        self.0.split_ascii_whitespace().nth(n.checked_sub(3)?)
    }

    fn number(&self, n: usize) -> Option<u64> {
        self.get(n)?.parse().ok()
    }
}

/// `(parent pid, start time in clock ticks since boot)` from the text of `/proc/<pid>/stat`.
/// The command name (field 2) may contain spaces and parentheses: fields are counted after its
/// last `)`.
pub fn parse_stat(text: &str) -> std::result::Result<(u32, u64), String> {
    let f = fields(text).ok_or("stat has no ')' after the command name")?;
    let ppid = f
        .get(4)
        .and_then(|v| v.parse().ok())
        .ok_or("stat has no parent pid field")?;
    let start = f.number(22).ok_or("stat has no start time field")?;
    Ok((ppid, start))
}

/// Whether a `stat` line describes a process that has exited (state `Z` or `X`).
#[must_use]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // only Linux has stat lines
pub fn is_zombie(stat: &str) -> bool {
    let state = fields(stat).and_then(|f| f.get(3));
    matches!(state, Some("Z" | "X"))
}

/// CPU time in clock ticks, user and system together, from the text of `/proc/<pid>/stat`.
/// Fields are counted after the last `)`, as the name may hold any.
#[must_use]
pub fn parse_stat_cpu_ticks(text: &str) -> Option<u64> {
    let f = fields(text)?;
    f.number(14)?.checked_add(f.number(15)?)
}

/// A process's state and relations from the text of `/proc/<pid>/stat`: field 3 (state, one
/// letter), 4 (parent pid), 5 (process group), 6 (session).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatIds {
    pub state: char,
    pub ppid: u32,
    pub pgrp: u32,
    pub session: u32,
}

/// [`StatIds`] from the text of `/proc/<pid>/stat`; `None` when a field is missing or odd.
#[must_use]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // only Linux has stat lines
pub fn parse_stat_ids(text: &str) -> Option<StatIds> {
    let f = fields(text)?;
    let mut state = f.get(3)?.chars();
    let (Some(letter), None) = (state.next(), state.next()) else {
        return None;
    };
    let id = |n| f.get(n)?.parse().ok();
    Some(StatIds {
        state: letter,
        ppid: id(4)?,
        pgrp: id(5)?,
        session: id(6)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_odd_names() {
        let text = "4242 (my (odd) name) S 4200 4242 4200 0 -1 4194560 120 0 0 0 1 2 0 0 20 0 1 0 98765 12345678 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(parse_stat(text), Ok((4200, 98765)));
        assert!(parse_stat("no paren").is_err());
        assert!(parse_stat("1 (x) S").is_err());
        assert!(is_zombie("9 (sleep) Z 1 9 9 0"));
        assert!(!is_zombie(text));
    }

    #[test]
    fn ids_are_read_after_the_last_parenthesis() {
        let text = "4411 (pt_data_worker (0)) Z 1 4400 4400 0 -1 0 0 0 0 0 1 2";
        let ids = parse_stat_ids(text).unwrap();
        assert_eq!(
            ids,
            StatIds {
                state: 'Z',
                ppid: 1,
                pgrp: 4400,
                session: 4400
            }
        );
        assert_eq!(parse_stat_ids("4411 (x) SZ 1 2 3"), None, "one letter");
        assert_eq!(parse_stat_ids("4411 (x) S 1 2"), None, "no session");
        assert_eq!(parse_stat_ids("4411 (x) S 1 -2 3"), None);
        assert_eq!(parse_stat_ids("no name"), None);
    }

    #[test]
    fn stat_cpu_ticks_count_after_the_last_parenthesis() {
        let line = "42 (my (evil) name) S 1 42 42 0 -1 4194304 100 0 0 0 250 50 7 9 20 0 1 0 12345 8192000 415 18446744073709551615 1 1 0 0 0 0 0\n";
        assert_eq!(parse_stat_cpu_ticks(line), Some(300));
        let short = "42 (x) S 1 2 3 4 5 6 7 8 9 10 11";
        assert_eq!(parse_stat_cpu_ticks(short), None, "cut short");
        let no_name = "no parenthesis 1 2 3 4 5 6 7 8 9 10 11 12 13";
        assert_eq!(parse_stat_cpu_ticks(no_name), None);
        let bad = line.replace(" 250 ", " 2x0 ");
        assert_eq!(parse_stat_cpu_ticks(&bad), None);
        let bad = line.replace(" 50 7 ", " -5 7 ");
        assert_eq!(parse_stat_cpu_ticks(&bad), None);
        let huge = line.replace(" 250 50 ", &format!(" {} 1 ", u64::MAX));
        assert_eq!(
            parse_stat_cpu_ticks(&huge),
            None,
            "an overflow is no figure"
        );
    }
}
