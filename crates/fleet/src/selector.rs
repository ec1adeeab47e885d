//! `--selector`: PromQL label matchers (`model=~"NVIDIA H.*", pool="a100", namespace!="ci"`),
//! evaluated here against each GPU's labels: its target's (node, instance, job, a pool), its
//! model, and the namespaces and pods holding memory on it. Matchers are evaluated here, not in
//! the queries, because the labels live on different series (the model on the info series, the
//! namespace on the pods'). As in PromQL, a label a GPU lacks is the empty string and a regular
//! expression must match the whole value; a label with several values on one GPU (the
//! namespaces of its pods) holds a matcher when one of them does.

use std::fmt;

use regex::Regex;

/// How a matcher compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `=`
    Equal,
    /// `!=`
    NotEqual,
    /// `=~`
    Matches,
    /// `!~`
    NotMatches,
}

/// One label matcher.
#[derive(Debug, Clone)]
pub struct Matcher {
    /// The label compared.
    pub label: String,
    /// How.
    pub op: Op,
    /// With what (a regular expression for `=~` and `!~`).
    pub value: String,
    regex: Option<Regex>,
}

impl Matcher {
    /// Whether `values` (the label's values on one GPU; none: the label is absent) hold it.
    #[must_use]
    pub fn holds(&self, values: &[&str]) -> bool {
        let one = |v: &str| match self.op {
            Op::Equal => v == self.value,
            Op::NotEqual => v != self.value,
            Op::Matches => self.regex.as_ref().is_some_and(|r| r.is_match(v)),
            Op::NotMatches => !self.regex.as_ref().is_some_and(|r| r.is_match(v)),
        };
        if values.is_empty() {
            one("")
        } else {
            values.iter().any(|v| one(v))
        }
    }
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.op {
            Op::Equal => "=",
            Op::NotEqual => "!=",
            Op::Matches => "=~",
            Op::NotMatches => "!~",
        };
        write!(f, "{}{op}{:?}", self.label, self.value)
    }
}

/// A list of matchers, all of which must hold.
#[derive(Debug, Clone, Default)]
pub struct Selector {
    /// The matchers.
    pub matchers: Vec<Matcher>,
}

impl Selector {
    /// Parses `text`: matchers separated by commas, optionally inside `{…}`.
    ///
    /// # Errors
    ///
    /// A message naming what is wrong and where.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut rest = text.trim();
        if let Some(inner) = rest.strip_prefix('{') {
            rest = inner
                .strip_suffix('}')
                .ok_or("the selector opens `{` and does not close it")?;
        }
        let mut chars = rest.char_indices().peekable();
        let mut matchers = Vec::new();
        loop {
            skip_space(&mut chars);
            let Some(&(start, _)) = chars.peek() else {
                break;
            };
            let mut end = start;
            while let Some(&(i, c)) = chars.peek() {
                if c.is_ascii_alphanumeric() || c == '_' {
                    end = i + c.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            let label = rest.get(start..end).unwrap_or_default().to_string();
            if label.is_empty() || label.starts_with(|c: char| c.is_ascii_digit()) {
                return Err(format!(
                    "a label name is expected at character {} of the selector",
                    start + 1
                ));
            }
            skip_space(&mut chars);
            let op = match (chars.next().map(|x| x.1), chars.peek().map(|x| x.1)) {
                (Some('='), Some('~')) => {
                    chars.next();
                    Op::Matches
                }
                (Some('='), _) => Op::Equal,
                (Some('!'), Some('=')) => {
                    chars.next();
                    Op::NotEqual
                }
                (Some('!'), Some('~')) => {
                    chars.next();
                    Op::NotMatches
                }
                _ => {
                    return Err(format!(
                        "after `{label}` the selector needs =, !=, =~ or !~"
                    ));
                }
            };
            skip_space(&mut chars);
            let value = quoted(&mut chars).ok_or_else(|| {
                format!("the value of `{label}` must be a quoted string (\"…\" or '…')")
            })?;
            let regex = match op {
                Op::Matches | Op::NotMatches => Some(
                    Regex::new(&format!("^(?:{value})$"))
                        .map_err(|e| format!("`{label}`'s regular expression: {e}"))?,
                ),
                Op::Equal | Op::NotEqual => None,
            };
            matchers.push(Matcher {
                label,
                op,
                value,
                regex,
            });
            skip_space(&mut chars);
            match chars.next() {
                None => break,
                Some((_, ',')) => {}
                Some((i, c)) => {
                    return Err(format!(
                        "`{c}` at character {} of the selector: matchers are separated by commas",
                        i + 1
                    ));
                }
            }
        }
        Ok(Self { matchers })
    }

    /// Whether a GPU whose labels `values` gives holds every matcher.
    pub fn holds<'a>(&self, values: impl Fn(&str) -> Vec<&'a str>) -> bool {
        self.matchers.iter().all(|m| m.holds(&values(&m.label)))
    }
}

type Chars<'a> = std::iter::Peekable<std::str::CharIndices<'a>>;

fn skip_space(chars: &mut Chars<'_>) {
    while chars.peek().is_some_and(|&(_, c)| c.is_whitespace()) {
        chars.next();
    }
}

/// A string in double or single quotes, its escapes (`\\`, `\"`, `\'`, `\n`, `\t`) read.
fn quoted(chars: &mut Chars<'_>) -> Option<String> {
    let (_, quote) = chars.next()?;
    if quote != '"' && quote != '\'' {
        return None;
    }
    let mut out = String::new();
    loop {
        let (_, c) = chars.next()?;
        match c {
            '\\' => {
                let (_, e) = chars.next()?;
                out.push(match e {
                    'n' => '\n',
                    't' => '\t',
                    other => other,
                });
            }
            c if c == quote => return Some(out),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn matchers_parse_and_hold_as_promql_says() {
        let s = Selector::parse(r#"{model=~"NVIDIA H.*", pool = 'a', namespace!="ci",x!~"y|z"}"#)
            .unwrap();
        assert_eq!(s.matchers.len(), 4);
        assert_eq!(s.matchers[0].to_string(), r#"model=~"NVIDIA H.*""#);
        let m = &s.matchers[0];
        assert!(m.holds(&["NVIDIA H200"]));
        assert!(!m.holds(&["an NVIDIA H200"]), "anchored");
        assert!(!m.holds(&[]), "absent is empty");
        let ns = &s.matchers[2];
        assert!(ns.holds(&[]), "no pod: no namespace, not ci");
        assert!(ns.holds(&["ci", "serve"]), "one of them");
        assert!(!ns.holds(&["ci"]));
        assert!(s.matchers[3].holds(&["w"]) && !s.matchers[3].holds(&["z"]));
        let labels = |l: &str| -> Vec<&'static str> {
            match l {
                "model" => vec!["NVIDIA H100 80GB HBM3"],
                "pool" => vec!["a"],
                _ => vec![],
            }
        };
        assert!(s.holds(labels));
        assert!(Selector::parse("").unwrap().matchers.is_empty());
        assert_eq!(
            Selector::parse(r#"a="q\"uote\\""#).unwrap().matchers[0].value,
            "q\"uote\\"
        );
    }

    #[test]
    fn bad_selectors_say_what_is_wrong() {
        for (bad, says) in [
            ("{a=\"b\"", "does not close"),
            ("=\"b\"", "label name"),
            ("a \"b\"", "needs =, !=, =~ or !~"),
            ("a=b", "quoted string"),
            ("a=\"b", "quoted string"),
            ("a=~\"(\"", "regular expression"),
            ("a=\"b\" c=\"d\"", "separated by commas"),
            ("9a=\"b\"", "label name"),
        ] {
            let e = Selector::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
