//! An instant query's answer as Prometheus's HTTP API gives it: `{"status": "success", "data":
//! {"resultType": "vector", "result": [{"metric": {…}, "value": [<unix seconds>, "<value>"]}]},
//! "warnings": […]}`, or `{"status": "error", "errorType": …, "error": …}`. Values are kept as
//! Prometheus wrote them (`NaN`, `+Inf`, `-Inf` included): what a figure may be is for its
//! reader to say.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::Error;

/// One series of an instant vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its labels, `__name__` included where the query kept it.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

impl Series {
    /// The label `name`, if present.
    #[must_use]
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.get(name).map(String::as_str)
    }
}

/// An instant vector and what Prometheus said beside it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// The series.
    pub series: Vec<Series>,
    /// Prometheus's warnings (a partial answer from a remote store, a limit reached).
    pub warnings: Vec<String>,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    status: String,
    #[serde(default, borrow)]
    data: Option<Data<'a>>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
    #[serde(default)]
    infos: Vec<String>,
}

#[derive(Deserialize)]
struct Data<'a> {
    #[serde(rename = "resultType")]
    result_type: String,
    /// Read once its type is known: a vector's series straight into their type.
    #[serde(borrow)]
    result: &'a serde_json::value::RawValue,
}

#[derive(Deserialize)]
struct RawSeries {
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

/// The answer to `query` from an HTTP `status` and its `body`, at most `max_series` series.
///
/// # Errors
///
/// [`Error::Prometheus`] for Prometheus's own error, [`Error::Status`] for another non-200
/// status, [`Error::Answer`] for a body that is not a vector answer (or is over the bound).
pub fn parse(query: &str, status: u16, body: &str, max_series: usize) -> Result<Answer, Error> {
    let fail = |why: String| Error::Answer {
        query: query.to_string(),
        why,
    };
    let envelope: Envelope = match serde_json::from_str(body) {
        Ok(e) => e,
        Err(e) if status == 200 => return Err(fail(format!("not Prometheus's JSON: {e}"))),
        Err(_) => {
            return Err(Error::Status {
                query: query.to_string(),
                status,
                excerpt: shown(body.trim()).into_owned(),
            });
        }
    };
    if envelope.status != "success" {
        return Err(Error::Prometheus {
            query: query.to_string(),
            kind: shown(envelope.error_type.as_deref().unwrap_or("unknown")).into_owned(),
            message: shown(envelope.error.as_deref().unwrap_or("no message")).into_owned(),
        });
    }
    if status != 200 {
        return Err(Error::Status {
            query: query.to_string(),
            status,
            excerpt: String::new(),
        });
    }
    let data = envelope
        .data
        .ok_or_else(|| fail("a success with no data".into()))?;
    if data.result_type != "vector" {
        return Err(fail(format!(
            "a {} where an instant vector was asked for",
            shown(&data.result_type)
        )));
    }
    let raw: Vec<RawSeries> =
        serde_json::from_str(data.result.get()).map_err(|e| fail(format!("a bad series: {e}")))?;
    let count = raw.len();
    if count > max_series {
        return Err(fail(format!(
            "{count} series, more than the {max_series} one answer may hold: narrow it with \
             --selector"
        )));
    }
    let series = raw
        .into_iter()
        .map(|r| Series {
            labels: r.metric,
            value: value(&r.value.1),
        })
        .collect();
    let mut warnings: Vec<String> = envelope
        .warnings
        .iter()
        .chain(&envelope.infos)
        .map(|w| shown(w).into_owned())
        .collect();
    warnings.dedup();
    Ok(Answer { series, warnings })
}

/// A sample value as Prometheus writes it: a number, `NaN`, `+Inf` or `-Inf` (Rust's parser
/// reads all four); anything else is NaN: unknown.
fn value(text: &str) -> f64 {
    text.parse().unwrap_or(f64::NAN)
}

/// The longest text shown of a label value or a message (the rest elided).
pub const SHOWN_CHARS: usize = 120;

/// `text` as it may be shown on a terminal: control characters escaped, at most
/// [`SHOWN_CHARS`] characters (then `…`).
#[must_use]
pub fn shown(text: &str) -> Cow<'_, str> {
    let plain = text.chars().count() <= SHOWN_CHARS && !text.chars().any(char::is_control);
    if plain {
        return Cow::Borrowed(text);
    }
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == SHOWN_CHARS {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_with_odd_values_and_warnings() {
        let body = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"x","node":"a"},"value":[1.5,"42"]},
            {"metric":{"node":"b"},"value":[1.5,"NaN"]},
            {"metric":{"node":"c"},"value":[1.5,"+Inf"]},
            {"metric":{"node":"d"},"value":[1.5,"-Inf"]},
            {"metric":{"node":"e"},"value":[1.5,"-3e9"]}]},
            "warnings":["partial answer"],"infos":["a note"]}"#;
        let a = parse("x", 200, body, 10).unwrap();
        assert_eq!(a.series.len(), 5);
        assert_eq!(a.series[0].label("node"), Some("a"));
        assert!((a.series[0].value - 42.0).abs() < f64::EPSILON);
        assert!(a.series[1].value.is_nan());
        assert!(a.series[2].value.is_infinite() && a.series[2].value > 0.0);
        assert!(a.series[3].value.is_infinite() && a.series[3].value < 0.0);
        assert!(a.series[4].value < 0.0);
        assert_eq!(a.warnings, ["partial answer", "a note"]);
    }

    #[test]
    fn errors_name_the_query_and_what_went_wrong() {
        let e = parse(
            "sum(",
            400,
            r#"{"status":"error","errorType":"bad_data","error":"parse error: unclosed"}"#,
            10,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("`sum(`") && e.contains("bad_data") && e.contains("unclosed"),
            "{e}"
        );
        let e = parse("up", 502, "<html>\u{1b}[31mbad gateway</html>", 10)
            .unwrap_err()
            .to_string();
        assert!(e.contains("HTTP 502") && e.contains("\\u{1b}"), "{e}");
        let e = parse("up", 200, "not json", 10).unwrap_err().to_string();
        assert!(e.contains("not Prometheus's JSON"), "{e}");
        let e = parse(
            "up",
            200,
            r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
            10,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("matrix"), "{e}");
        let many: Vec<String> = (0..11)
            .map(|i| format!(r#"{{"metric":{{"i":"{i}"}},"value":[1,"1"]}}"#))
            .collect();
        let body = format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
            many.join(",")
        );
        let e = parse("up", 200, &body, 10).unwrap_err().to_string();
        assert!(e.contains("11 series") && e.contains("--selector"), "{e}");
        assert_eq!(
            parse("up", 200, &body, 11).unwrap().series.len(),
            11,
            "at the bound"
        );
        let odd = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"lots"]}]}}"#;
        assert!(parse("up", 200, odd, 1).unwrap().series[0].value.is_nan());
        let e = parse(
            "up",
            200,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"1"]}]}}"#,
            10,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("a bad series"), "{e}");
    }

    #[test]
    fn shown_text_is_bounded_and_escaped() {
        assert_eq!(shown("node-a"), "node-a");
        let long = "x".repeat(10_000);
        let s = shown(&long);
        assert_eq!(s.chars().count(), SHOWN_CHARS + 1);
        assert!(s.ends_with('…'));
        assert_eq!(shown("a\nb\u{7}"), "a\\nb\\u{7}");
    }
}
