//! The `hmn run --plot` SVG: the tree's RAM (as `--json`'s `peak_rss_bytes` counts it) and GPU
//! memory per device over time, peaks marked.

use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use hypomnesis::GpuDeviceInfo;

use super::run::Point;

const MIB: f64 = 1_048_576.0;
const GIB: f64 = 1_073_741_824.0;

/// The unit the axis uses for a maximum of `max` bytes.
pub fn unit(max: u64) -> (&'static str, f64) {
    #[allow(clippy::cast_precision_loss)] // display only
    if max as f64 >= 2.0 * GIB {
        ("GiB", GIB)
    } else {
        ("MiB", MIB)
    }
}

#[allow(clippy::cast_precision_loss)] // display only
fn series(points: &[Point], pick: impl Fn(&Point) -> Option<u64>, scale: f64) -> Vec<(f64, f64)> {
    points
        .iter()
        .filter_map(|p| pick(p).map(|b| (p.t.as_secs_f64(), b as f64 / scale)))
        .collect()
}

/// Which side of data point (x, y) its label goes so that it stays inside a chart of `x_max`
/// by `y_max`: `(left, below)`, to the left of points in the right 40%, below points in the
/// top 15%.
pub fn label_side(x: f64, y: f64, x_max: f64, y_max: f64) -> (bool, bool) {
    (x > 0.6 * x_max, y > 0.85 * y_max)
}

/// The text anchor of a label on that side of its point.
fn label_anchor(x: f64, y: f64, x_max: f64, y_max: f64) -> Pos {
    let (left, below) = label_side(x, y, x_max, y_max);
    Pos::new(
        if left { HPos::Right } else { HPos::Left },
        if below { VPos::Top } else { VPos::Bottom },
    )
}

/// A device's capacity marks: (label, bytes) for its total and, when the reservation is
/// known, what allocations can use (total − reserved).
pub fn capacity_marks(total: Option<u64>, reserved: Option<u64>) -> Vec<(&'static str, u64)> {
    let Some(total) = total else {
        return Vec::new();
    };
    let mut v = vec![("total", total)];
    if let Some(usable) = reserved
        .and_then(|r| total.checked_sub(r))
        .filter(|&u| u < total)
    {
        v.push(("usable (total − reserved)", usable));
    }
    v
}

/// Whether capacity lines at `capacity` bytes fit a chart of data up to `data_max` bytes
/// without squashing the data to a sliver (the data reaches at least a quarter of it);
/// otherwise the capacity is written as text.
pub fn capacity_on_scale(capacity: u64, data_max: u64) -> bool {
    data_max.saturating_mul(4) >= capacity
}

fn peak(s: &[(f64, f64)]) -> Option<(f64, f64)> {
    s.iter()
        .copied()
        .fold(None, |best: Option<(f64, f64)>, p| match best {
            Some(b) if b.1 >= p.1 => Some(b),
            _ => Some(p),
        })
}

/// Draw the timeline to `path`: the tree's RAM and each GPU of `devices` (as first read; `None`
/// when unreadable) over time, titled with the command line.
pub fn draw(
    path: &Path,
    points: &[Point],
    devices: &[Option<GpuDeviceInfo>],
    command: &str,
    phases: &[Band],
) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    // The GPUs the tree held memory on: their other processes are drawn too.
    let used = used_gpus(points, devices.len());
    let others = |p: &Point| {
        used.iter()
            .filter_map(|&i| p.others.get(i).copied().flatten())
            .collect::<Vec<u64>>()
    };
    let max = points
        .iter()
        .flat_map(|p| {
            p.rss
                .into_iter()
                .chain(p.gpu.iter().flatten().copied())
                .chain(others(p))
        })
        .max()
        .unwrap_or(0);
    // Each GPU's total and usable memory, drawn as lines when the data comes near them.
    let marks: Vec<(u32, Vec<(&str, u64)>)> = (0_u32..)
        .zip(devices)
        .map(|(i, d)| {
            let d = d.as_ref();
            (
                i,
                capacity_marks(d.map(|d| d.total_bytes), d.and_then(|d| d.reserved_bytes)),
            )
        })
        .collect();
    let on_scale = |cap: u64| capacity_on_scale(cap, max);
    let top = marks
        .iter()
        .flat_map(|(_, m)| m.iter().map(|(_, b)| *b))
        .filter(|&b| on_scale(b))
        .max()
        .unwrap_or(0)
        .max(max);
    let (unit_name, scale) = unit(top);
    let t_max = points.last().map_or(0.0, |p| p.t.as_secs_f64()).max(0.001);
    #[allow(clippy::cast_precision_loss)] // display only
    let y_max = (top as f64 / scale * 1.15).max(1.0);
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title(command), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..t_max, 0.0..y_max)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc(format!("memory ({unit_name})"))
        .draw()
        .map_err(|x| e(&x))?;
    draw_bands(&mut chart, phases, y_max)?;
    let lines = lines_of(points, devices, &used, scale);
    let axes = Axes {
        unit_name,
        t_max,
        y_max,
    };
    for (k, (label, data)) in lines.into_iter().enumerate() {
        draw_line(&mut chart, k, label, data, &axes)?;
    }
    draw_capacity(&mut chart, &marks, max, scale, t_max, y_max)?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// A stretch of the run drawn as a band: a serving engine's phase (from, to in seconds, what
/// it was doing).
pub type Band = (f64, f64, String);

/// The phases as light bands behind the lines, each labelled at its start (two heights in
/// turn, so neighbouring labels do not overlap).
fn draw_bands(chart: &mut Chart<'_, '_>, phases: &[Band], y_max: f64) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let shades = [RGBColor(226, 234, 250), RGBColor(246, 238, 222)];
    let drawn = phases.iter().filter(|(from, to, _)| to > from);
    for (k, (from, to, label)) in drawn.enumerate() {
        let shade = shades.get(k % 2).copied().unwrap_or(WHITE);
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(*from, 0.0), (*to, y_max)],
                shade.filled(),
            )))
            .map_err(|x| e(&x))?;
        let height = if k % 2 == 0 { 0.985 } else { 0.94 };
        let style = ("sans-serif", 12).into_font().color(&RGBColor(80, 80, 80));
        let text: String = label.chars().filter(|c| !c.is_control()).take(40).collect();
        chart
            .draw_series(std::iter::once(Text::new(
                text,
                (*from, y_max * height),
                style,
            )))
            .map_err(|x| e(&x))?;
    }
    Ok(())
}

/// The series drawn: the tree's RAM, its GPU memory on each device, and the other processes'
/// memory on each GPU the tree used (`used`).
fn lines_of(
    points: &[Point],
    devices: &[Option<GpuDeviceInfo>],
    used: &[usize],
    scale: f64,
) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = vec![(
        "RAM (process tree)".into(),
        series(points, |p| p.rss, scale),
    )];
    for (i, d) in devices.iter().enumerate() {
        let name = d
            .as_ref()
            .and_then(|d| d.name.as_deref())
            .map_or(String::new(), |n| format!(" {n}"));
        lines.push((
            format!("GPU {i}{name}"),
            series(points, |p| p.gpu.get(i).copied().flatten(), scale),
        ));
    }
    for &i in used {
        let data = series(points, |p| p.others.get(i).copied().flatten(), scale);
        if data.iter().any(|(_, y)| *y > 0.0) {
            lines.push((format!("other processes on GPU {i}"), data));
        }
    }
    lines
}

/// The devices (of `n`) the tree held memory on at some point.
fn used_gpus(points: &[Point], n: usize) -> Vec<usize> {
    (0..n)
        .filter(|&i| {
            points
                .iter()
                .any(|p| p.gpu.get(i).copied().flatten().is_some_and(|b| b > 0))
        })
        .collect()
}

/// `hmn run: <command>`, control characters as spaces, cut to 90 characters.
fn title(command: &str) -> String {
    let title: String = format!("hmn run: {command}")
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if title.chars().count() > 90 {
        title.chars().take(89).collect::<String>() + "…"
    } else {
        title
    }
}

/// The scale of a chart, for placing labels.
struct Axes {
    unit_name: &'static str,
    t_max: f64,
    y_max: f64,
}

/// One series (colour `k` of the palette) with its peak marked and labelled inside the chart.
fn draw_line(
    chart: &mut Chart<'_, '_>,
    k: usize,
    label: String,
    data: Vec<(f64, f64)>,
    axes: &Axes,
) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    if data.is_empty() {
        return Ok(());
    }
    let color = Palette99::pick(k).to_rgba();
    let pk = peak(&data);
    chart
        .draw_series(LineSeries::new(data, color.stroke_width(2)))
        .map_err(|x| e(&x))?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    if let Some((x, y)) = pk {
        chart
            .draw_series(std::iter::once(Circle::new((x, y), 5, color.filled())))
            .map_err(|x| e(&x))?;
        let style = ("sans-serif", 14)
            .into_font()
            .color(&BLACK)
            .pos(label_anchor(x, y, axes.t_max, axes.y_max));
        chart
            .draw_series(std::iter::once(Text::new(
                format!("peak {y:.1} {}", axes.unit_name),
                (x, y),
                style,
            )))
            .map_err(|x| e(&x))?;
    }
    Ok(())
}

/// The chart `draw` paints on.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Each GPU's capacity: a dashed line with its label at the left edge, or, when far off the
/// data's scale (`data_max`), a note at the top.
fn draw_capacity(
    chart: &mut Chart<'_, '_>,
    marks: &[(u32, Vec<(&str, u64)>)],
    data_max: u64,
    scale: f64,
    t_max: f64,
    y_max: f64,
) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let on_scale = |cap: u64| capacity_on_scale(cap, data_max);
    let mut notes = Vec::new();
    for (i, m) in marks {
        for (label, bytes) in m {
            #[allow(clippy::cast_precision_loss)] // display only
            let y = *bytes as f64 / scale;
            let text = format!("GPU {i} {label} {}", super::format_size(*bytes));
            if !on_scale(*bytes) {
                notes.push(text);
                continue;
            }
            let grey = BLACK.mix(0.55);
            chart
                .draw_series(DashedLineSeries::new(
                    [(0.0, y), (t_max, y)],
                    6,
                    4,
                    grey.stroke_width(1),
                ))
                .map_err(|x| e(&x))?;
            // The total's label above its line, the usable part's below its own: the two
            // lines are close (a reservation is a small share of the total).
            let v = if *label == "total" {
                VPos::Bottom
            } else {
                VPos::Top
            };
            let style = ("sans-serif", 12)
                .into_font()
                .color(&grey)
                .pos(Pos::new(HPos::Left, v));
            chart
                .draw_series(std::iter::once(Text::new(text, (0.0, y), style)))
                .map_err(|x| e(&x))?;
        }
    }
    if !notes.is_empty() {
        let note = format!("off scale: {}", notes.join("; "));
        let style = ("sans-serif", 12)
            .into_font()
            .color(&BLACK.mix(0.55))
            .pos(Pos::new(HPos::Left, VPos::Top));
        chart
            .draw_series(std::iter::once(Text::new(note, (0.0, y_max), style)))
            .map_err(|x| e(&x))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_peaks() {
        assert_eq!(unit(100 << 20).0, "MiB");
        assert_eq!(unit(3 << 30).0, "GiB");
        assert_eq!(
            peak(&[(0.0, 1.0), (1.0, 5.0), (2.0, 5.0), (3.0, 2.0)]),
            Some((1.0, 5.0))
        );
        assert_eq!(peak(&[]), None);
    }

    #[test]
    fn labels_stay_inside() {
        let at = |x, y| label_side(x, y, 10.0, 100.0);
        assert_eq!(at(10.0, 50.0), (true, false), "right edge: to the left");
        assert_eq!(at(0.0, 50.0), (false, false));
        assert_eq!(
            at(9.0, 99.0),
            (true, true),
            "top right corner: left and below"
        );
    }

    #[test]
    fn capacity() {
        use crate::view::GIB;
        assert_eq!(
            capacity_marks(Some(140 * GIB), Some(GIB)),
            vec![
                ("total", 140 * GIB),
                ("usable (total − reserved)", 139 * GIB)
            ]
        );
        assert_eq!(
            capacity_marks(Some(16 * GIB), None),
            vec![("total", 16 * GIB)]
        );
        assert_eq!(
            capacity_marks(Some(16 * GIB), Some(0)),
            vec![("total", 16 * GIB)]
        );
        assert!(capacity_marks(None, Some(GIB)).is_empty());
        assert!(capacity_on_scale(140 * GIB, 100 * GIB));
        assert!(!capacity_on_scale(140 * GIB, 3 * GIB));
    }
}
