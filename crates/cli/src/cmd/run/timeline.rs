//! Where the timeline of `hmn run` goes while the command runs: the CSV file, written row by
//! row, and the plot's points, kept within a fixed number however long the run (neighbouring
//! points merge, each figure keeping its maximum, so peaks survive). Without either, nothing is
//! kept but the peaks.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use hypomnesis::sampling::{Fold, Timeline as Bounded};

use crate::view::run::{self as render, Point};
use hypomnesis::sampling::max_opt;

/// Most points the plot keeps (a plot is at most a few thousand pixels wide).
pub const PLOT_POINTS: usize = 2048;

/// The CSV and the plot of a run.
#[derive(Debug)]
pub struct Timeline {
    csv: Option<Csv>,
    plot: Option<Bounded<PlotPoint>>,
}

#[derive(Debug)]
struct Csv {
    path: PathBuf,
    /// `None` once a write failed (said once).
    file: Option<BufWriter<File>>,
    header: bool,
}

impl Timeline {
    /// Opens the CSV file and makes sure the plot's can be written, before the command starts;
    /// the path that cannot be written and why, otherwise.
    pub fn open(csv: Option<&Path>, plot: Option<&Path>) -> Result<Self, (PathBuf, io::Error)> {
        let csv = match csv {
            Some(path) => Some(Csv {
                path: path.to_path_buf(),
                file: Some(BufWriter::new(
                    File::create(path).map_err(|e| (path.to_path_buf(), e))?,
                )),
                header: false,
            }),
            None => None,
        };
        if let Some(path) = plot {
            File::create(path).map_err(|e| (path.to_path_buf(), e))?;
        }
        Ok(Self {
            csv,
            plot: plot.map(|_| Bounded::new(PLOT_POINTS)),
        })
    }

    /// One sample, of a run on `devices` devices.
    pub fn add(&mut self, p: &Point, devices: usize, err: &mut impl Write) -> io::Result<()> {
        if let Some(csv) = &mut self.csv {
            csv.write(
                devices,
                |w| w.write_all(render::csv_row(p, devices).as_bytes()),
                err,
            )?;
        }
        if let Some(plot) = &mut self.plot {
            plot.push(PlotPoint(p.clone()));
        }
        Ok(())
    }

    /// The CSV complete (its header alone when no sample was taken), flushed.
    pub fn finish_csv(&mut self, devices: usize, err: &mut impl Write) -> io::Result<()> {
        if let Some(csv) = &mut self.csv {
            csv.write(devices, Write::flush, err)?;
        }
        Ok(())
    }

    /// The plot's points, when a plot was asked for.
    pub fn plot_points(&self) -> Option<Vec<Point>> {
        self.plot
            .as_ref()
            .map(|t| t.points().map(|p| p.0.clone()).collect())
    }
}

impl Csv {
    /// Runs `f` on the file, after the header (for `devices` devices) the first time; a failure
    /// is said once and ends the CSV.
    fn write(
        &mut self,
        devices: usize,
        f: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
        err: &mut impl Write,
    ) -> io::Result<()> {
        let header = !std::mem::replace(&mut self.header, true);
        if let Some(w) = &mut self.file
            && let Err(e) = if header {
                w.write_all(render::csv_header(devices).as_bytes())
            } else {
                Ok(())
            }
            .and_then(|()| f(w))
        {
            writeln!(err, "hmn run: cannot write {}: {e}", self.path.display())?;
            self.file = None;
        }
        Ok(())
    }
}

/// A sample folded into the point before it (the library's bounded timeline): every
/// figure its maximum; the point keeps its own time.
impl Fold for PlotPoint {
    fn fold(&mut self, later: &Self) {
        let (a, b) = (&mut self.0, &later.0);
        a.rss = max_opt(a.rss, b.rss);
        for (mine, theirs) in [
            (&mut a.gpu, &b.gpu),
            (&mut a.device_used, &b.device_used),
            (&mut a.others, &b.others),
        ] {
            if mine.len() < theirs.len() {
                mine.resize(theirs.len(), None);
            }
            for (m, t) in mine.iter_mut().zip(theirs) {
                *m = max_opt(*m, *t);
            }
        }
    }
}

/// A point of the plot (a [`Point`] that folds).
#[derive(Debug, Clone)]
struct PlotPoint(Point);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn pt(i: u64) -> Point {
        Point {
            t: Duration::from_millis(i),
            rss: Some(i % 97),
            gpu: vec![Some(i % 89), None],
            device_used: vec![Some(1000 + i % 13)],
            others: vec![Some(i % 7)],
        }
    }

    #[test]
    fn a_long_run_keeps_a_bounded_number_of_points_and_every_peak() {
        let mut d = Bounded::new(64);
        let mut spike = pt(0);
        for i in 0..100_000 {
            let mut p = pt(i);
            if i == 77_777 {
                p.rss = Some(5_000);
                p.gpu[1] = Some(7);
                spike = p.clone();
            }
            d.push(PlotPoint(p));
            assert!(d.len() <= 64, "at {i}: {}", d.len());
        }
        let points: Vec<Point> = d.points().map(|p| p.0.clone()).collect();
        assert!(points.len() >= 32, "{}", points.len());
        let peak = |f: fn(&Point) -> Option<u64>| points.iter().filter_map(f).max();
        assert_eq!(peak(|p| p.rss), spike.rss, "the spike survives");
        assert_eq!(peak(|p| p.gpu[0]), Some(88));
        assert_eq!(peak(|p| p.gpu[1]), Some(7));
        assert_eq!(peak(|p| p.device_used[0]), Some(1012));
        assert_eq!(
            points[0].t,
            Duration::ZERO,
            "a point is at its first sample's time"
        );
        assert!(points.windows(2).all(|w| w[0].t < w[1].t), "in order");
    }

    #[test]
    fn a_short_run_keeps_every_sample() {
        let mut d = Bounded::new(64);
        for i in 0..10 {
            d.push(PlotPoint(pt(i)));
        }
        let points: Vec<Point> = d.points().map(|p| p.0.clone()).collect();
        assert_eq!(points.len(), 10);
        assert_eq!(points[3], pt(3));
    }
}
