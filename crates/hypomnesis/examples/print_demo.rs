//! Snapshot before and after allocating (and touching) 256 MiB, then print every formatter of
//! the `report` feature. Run: `cargo run --example print_demo --features report`.

use hypomnesis::{MemoryReport, Snapshot};

fn main() -> hypomnesis::Result<()> {
    let before = Snapshot::now(0)?;
    let block = vec![1_u8; 256 << 20];
    let block = std::hint::black_box(block);
    let after = Snapshot::now(0)?;
    println!(
        "RAM before {:.0} MB, after {:.0} MB",
        before.ram_mb(),
        after.ram_mb()
    );
    let mine = match (after.vram_mb(), &after.gpu) {
        (Some(v), Some(g)) if g.is_per_process => format!("{v:.0} MB"),
        (Some(v), _) => format!("not attributable here; the whole device uses {v:.0} MB"),
        (None, _) => "unknown (no GPU source answered)".to_string(),
    };
    println!("VRAM of this process: {mine}");
    if let Some(d) = &after.gpu_device {
        print!("{}", d.format_free());
        print!("{}", d.format_total());
        print!("{}", d.format_used());
        d.print_free();
    } else {
        println!("  (no GPU device figures on this host)");
    }
    let report = MemoryReport::new(before, after);
    let vram = report
        .vram_delta_mb()
        .map_or_else(|| "unknown".to_string(), |v| format!("{v:+.0} MB"));
    println!("delta {:+.0} MB RAM, VRAM {vram}", report.ram_delta_mb());
    print!("{}", report.format_delta("256 MiB block"));
    print!("{}", report.format_before_after("256 MiB block"));
    report.print_delta("256 MiB block");
    report.print_before_after("256 MiB block");
    drop(block);
    Ok(())
}
