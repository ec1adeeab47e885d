//! The `hmn run --plot` SVG: RSS and GPU memory per device over time, peaks marked.

use std::path::Path;

use plotters::prelude::*;

use crate::run::{Point, Summary};
use crate::sample::Devices;

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

fn peak(s: &[(f64, f64)]) -> Option<(f64, f64)> {
    s.iter()
        .copied()
        .fold(None, |best: Option<(f64, f64)>, p| match best {
            Some(b) if b.1 >= p.1 => Some(b),
            _ => Some(p),
        })
}

/// Draw the timeline to `path`.
pub fn draw(
    path: &Path,
    points: &[Point],
    devices: &Devices,
    summary: &Summary,
) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let max = points
        .iter()
        .flat_map(|p| p.rss.into_iter().chain(p.gpu.iter().flatten().copied()))
        .max()
        .unwrap_or(0);
    let (unit_name, scale) = unit(max);
    let t_max = points.last().map_or(0.0, |p| p.t.as_secs_f64()).max(0.001);
    #[allow(clippy::cast_precision_loss)] // display only
    let y_max = (max as f64 / scale * 1.15).max(1.0);
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut title = format!("hmn run: {}", summary.command.join(" "));
    if title.chars().count() > 90 {
        title = title.chars().take(89).collect::<String>() + "…";
    }
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
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
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = vec![(
        "RSS (process tree)".into(),
        series(points, |p| p.rss, scale),
    )];
    for i in 0..devices.count() {
        let name = devices.name(i).map_or(String::new(), |n| format!(" {n}"));
        lines.push((
            format!("GPU {i}{name}"),
            series(points, |p| p.gpu.get(i as usize).copied().flatten(), scale),
        ));
    }
    for (k, (label, data)) in lines.into_iter().enumerate() {
        if data.is_empty() {
            continue;
        }
        let color = Palette99::pick(k).to_rgba();
        let pk = peak(&data);
        chart
            .draw_series(LineSeries::new(data, color.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        if let Some((x, y)) = pk {
            chart
                .draw_series(std::iter::once(Circle::new((x, y), 5, color.filled())))
                .map_err(|x| e(&x))?;
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("peak {y:.1} {unit_name}"),
                    (x, y),
                    ("sans-serif", 14),
                )))
                .map_err(|x| e(&x))?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
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
}
