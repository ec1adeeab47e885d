//! The ledger from events and samples made by hand: the engine's figures against the driver's,
//! the gap, the phases and who moved in each, the sizing window, the failure's holders and
//! what would have fitted.

use std::collections::BTreeMap;
use std::time::Duration;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use hypomnesis::sampling::{DeviceFrame, Frame};
use hypomnesis::{GpuDeviceInfo, GpuProcessEntry};

use super::ledger::{Follow, GpuAt, Moment, Who, build};
use super::{Engine, Event, Figure, Heard, Kind};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn event(
    at_ms: u64,
    engine: Engine,
    kind: Kind,
    pattern: &'static str,
    figures: &[(&'static str, u64)],
) -> Event {
    Event {
        at: Duration::from_millis(at_ms),
        engine,
        kind,
        pattern,
        seen_in: "test",
        figures: figures
            .iter()
            .map(|&(k, v)| (k, Figure::Bytes(v)))
            .collect(),
        line: pattern.to_string(),
    }
}

fn moment(at_ms: u64, own: u64, others: &[(u32, u64)]) -> Moment {
    let g = GpuAt {
        total: Some(140 * GIB),
        free: Some(140 * GIB - own - others.iter().map(|o| o.1).sum::<u64>()),
        reserved: Some(600 * MIB),
        own,
        others: others.iter().copied().collect(),
    };
    Moment {
        at: Duration::from_millis(at_ms),
        gpus: BTreeMap::from([(0, g)]),
    }
}

fn who(pid: u32) -> Who {
    Who {
        command: Some(format!("job-{pid}")),
        pod: (pid == 7).then(|| "serve-b".to_string()),
    }
}

fn i(b: u64) -> i64 {
    i64::try_from(b).unwrap()
}

/// vLLM's start: weights 15 GiB at 1 s, profiled (its non-torch 21 GiB) and its KV cache sized
/// at 2 s while pid 7 grew by 20 GiB, allocated at 3 s, graphs at 4 s.
fn vllm_start() -> (Vec<Event>, Vec<Moment>, Moment) {
    let v = Engine::Vllm;
    let events = vec![
        event(
            1000,
            v,
            Kind::WeightsLoaded,
            "vllm.weights",
            &[("weights_bytes", 15 * GIB)],
        ),
        event(
            2000,
            v,
            Kind::Profiled,
            "vllm.profile",
            &[("non_torch_bytes", 21 * GIB), ("activations_bytes", GIB)],
        ),
        event(
            2000,
            v,
            Kind::KvCacheSized,
            "vllm.kv_cache_memory",
            &[("kv_cache_bytes", 80 * GIB)],
        ),
        event(3000, v, Kind::KvCacheAllocated, "vllm.kv_cache_tokens", &[]),
        event(
            4000,
            v,
            Kind::GraphsCaptured,
            "vllm.graphs_captured",
            &[("cuda_graphs_bytes", GIB)],
        ),
    ];
    let ctx = 512 * MIB;
    let moments = vec![
        moment(1050, ctx + 15 * GIB, &[(7, 10 * GIB), (9, 2 * GIB)]),
        moment(2050, ctx + 15 * GIB, &[(7, 30 * GIB), (9, 2 * GIB)]),
        moment(2050, ctx + 15 * GIB, &[(7, 30 * GIB), (9, 2 * GIB)]),
        moment(3050, ctx + 95 * GIB, &[(7, 30 * GIB), (9, 2 * GIB)]),
        moment(4050, ctx + 96 * GIB, &[(7, 30 * GIB), (9, 2 * GIB)]),
    ];
    let start = moment(0, ctx, &[(7, 10 * GIB), (9, 2 * GIB)]);
    (events, moments, start)
}

#[test]
fn each_row_sets_the_engines_figures_beside_the_drivers() {
    let (events, moments, start) = vllm_start();
    let m: Vec<Option<&Moment>> = moments.iter().map(Some).collect();
    let r = build(&events, &m, Some(&start), &who).unwrap();
    assert_eq!((r.engine, r.gpu), (Engine::Vllm, Some(0)));
    let rows: Vec<(u64, Option<u64>, Option<i64>)> = r
        .ledger
        .iter()
        .map(|row| (row.engine_accounts_bytes, row.driver_bytes, row.gap_bytes))
        .collect();
    let ctx = 512 * MIB;
    assert_eq!(
        rows,
        [
            // Weights alone: the context is the gap.
            (15 * GIB, Some(ctx + 15 * GIB), Some(i(ctx))),
            // Its non-torch figure counts 21 GiB the driver does not charge it.
            (
                36 * GIB,
                Some(ctx + 15 * GIB),
                Some(i(ctx + 15 * GIB) - i(36 * GIB))
            ),
            // Sized, not allocated yet: not counted.
            (
                36 * GIB,
                Some(ctx + 15 * GIB),
                Some(i(ctx + 15 * GIB) - i(36 * GIB))
            ),
            (
                116 * GIB,
                Some(ctx + 95 * GIB),
                Some(i(ctx + 95 * GIB) - i(116 * GIB))
            ),
            (
                117 * GIB,
                Some(ctx + 96 * GIB),
                Some(i(ctx + 96 * GIB) - i(117 * GIB))
            ),
        ]
    );
    assert_eq!(r.ledger[1].activations_bytes, Some(GIB));
    assert_eq!(r.ledger[2].kv_cache_bytes, Some(80 * GIB));
}

#[test]
fn the_neighbours_growth_is_named_in_its_phase_and_in_the_sizing_window() {
    let (events, moments, start) = vllm_start();
    let m: Vec<Option<&Moment>> = moments.iter().map(Some).collect();
    let r = build(&events, &m, Some(&start), &who).unwrap();
    // Phases: start→weights (nobody moved), weights→profiled (pid 7 +20 GiB), then the rest
    // (sizing, at the same moment as profiled, is no stretch of time).
    let doing: Vec<&str> = r.phases.iter().map(|p| p.doing).collect();
    assert_eq!(
        doing,
        [
            "loading its weights",
            "profiling memory",
            "allocating its KV cache",
            "capturing CUDA graphs"
        ]
    );
    assert!(r.phases[0].largest.is_empty());
    let p = &r.phases[1];
    assert_eq!((p.from_s, p.to_s), (1.0, 2.0));
    assert_eq!(p.others_change_bytes, i(20 * GIB));
    assert_eq!(p.largest.len(), 1);
    assert_eq!(p.largest[0].pid, 7);
    assert_eq!(p.largest[0].bytes, i(20 * GIB));
    assert_eq!(p.largest[0].who.pod.as_deref(), Some("serve-b"));
    // The window it sized its KV cache in: from the start to that line; 20 GiB of its 21 GiB
    // of non-torch memory were pid 7's.
    let s = r.sizing.unwrap();
    assert_eq!(
        (s.from_s, s.to_s, s.others_change_bytes),
        (0.0, 2.0, i(20 * GIB))
    );
    assert_eq!(s.in_its_non_torch_bytes, Some(20 * GIB));
    assert_eq!(s.largest[0].pid, 7);
}

#[test]
fn small_moves_are_not_named_and_a_quiet_gpu_has_no_sizing() {
    let (events, mut moments, start) = vllm_start();
    for m in &mut moments {
        let g = m.gpus.get_mut(&0).unwrap();
        g.others.insert(7, 10 * GIB + 32 * MIB);
    }
    let m: Vec<Option<&Moment>> = moments.iter().map(Some).collect();
    let r = build(&events, &m, Some(&start), &who).unwrap();
    assert!(r.sizing.is_none());
    assert!(r.phases.iter().all(|p| p.largest.is_empty()));
}

#[test]
fn a_failure_names_its_holders_largest_first_and_what_would_have_fitted() {
    let v = Engine::Vllm;
    let events = vec![event(
        100,
        v,
        Kind::OutOfMemory,
        "vllm.free_below_utilization",
        &[
            ("free_bytes", 100 * GIB),
            ("total_bytes", 140 * GIB),
            ("wanted_bytes", 126 * GIB),
        ],
    )];
    // It held nothing yet: the GPU is the only one listed.
    let at = moment(150, 0, &[(9, 2 * GIB), (7, 38 * GIB), (5, 0)]);
    let r = build(&events, &[Some(&at)], None, &who).unwrap();
    assert_eq!(r.gpu, Some(0));
    let f = r.failure.unwrap();
    let holders: Vec<(u32, u64)> = f.holders.iter().map(|h| (h.pid, h.bytes)).collect();
    assert_eq!(
        holders,
        [(7, 38 * GIB), (9, 2 * GIB)],
        "largest first, nothing-holders left out"
    );
    assert_eq!(f.others_bytes, Some(40 * GIB));
    assert_eq!(
        (f.free_bytes, f.total_bytes, f.reserved_bytes),
        (Some(100 * GIB), Some(140 * GIB), Some(600 * MIB))
    );
    // 100 of 140 GiB free: 0.71 would have fitted; 26 GiB short.
    assert_eq!(f.fits.utilization, Some(0.71));
    assert_eq!(f.fits.short_bytes, Some(26 * GIB));
    // No line the table knows before it: no rows but the failure's.
    assert_eq!(r.ledger.len(), 1);
    // Many holders: the five largest are named, the others counted in their sum.
    let many: Vec<(u32, u64)> = (10..18).map(|p| (p, u64::from(p) * GIB)).collect();
    let at = moment(150, 0, &many);
    let f = build(&events, &[Some(&at)], None, &who)
        .unwrap()
        .failure
        .unwrap();
    let named: Vec<u32> = f.holders.iter().map(|h| h.pid).collect();
    assert_eq!(named, [17, 16, 15, 14, 13]);
    assert_eq!(f.others_bytes, Some((10..18).sum::<u64>() * GIB));
}

#[test]
fn pytorchs_error_alone_is_pytorchs_and_an_engines_lines_win_over_it() {
    let t = event(
        10,
        Engine::Torch,
        Kind::OutOfMemory,
        "pytorch.out_of_memory",
        &[("tried_bytes", 20 * GIB), ("free_bytes", 3 * GIB)],
    );
    let at = moment(20, GIB, &[]);
    let r = build(std::slice::from_ref(&t), &[Some(&at)], None, &who).unwrap();
    assert_eq!(r.engine, Engine::Torch);
    assert_eq!(r.failure.unwrap().fits.short_bytes, Some(17 * GIB));
    let w = event(
        5,
        Engine::Sglang,
        Kind::WeightsLoaded,
        "sglang.load_end",
        &[("weights_bytes", GIB)],
    );
    let r = build(&[w, t], &[Some(&at), Some(&at)], None, &who).unwrap();
    assert_eq!(r.engine, Engine::Sglang);
    // Its ledger rows are its own lines; the failure is the first, whoever printed it.
    assert_eq!(r.ledger.len(), 1);
    assert_eq!(r.failure.unwrap().pattern, "pytorch.out_of_memory");
    assert!(build(&[], &[], None, &who).is_none());
}

#[test]
fn sglangs_failure_says_the_fraction_that_would_have_left_room() {
    let e = event(
        10,
        Engine::Sglang,
        Kind::OutOfMemory,
        "sglang.not_enough_memory",
        &[],
    );
    // 30 of 140 GiB free: a fraction above 1 - 30/140 = 0.7857… leaves room.
    let at = moment(20, 16 * GIB, &[(7, 94 * GIB)]);
    let r = build(&[e], &[Some(&at)], None, &who).unwrap();
    let f = r.failure.unwrap();
    assert_eq!(f.free_bytes, Some(30 * GIB));
    assert_eq!(f.fits.mem_fraction_static_above, Some(0.79));
}

#[test]
fn lines_heard_between_samples_get_the_next_sample_and_a_failure_the_one_before() {
    let heard = Arc::new(Heard::new(Instant::now()));
    let mut follow = Follow::new(Arc::clone(&heard));
    follow.add(moment(0, 512 * MIB, &[(7, 10 * GIB)]));
    assert!(!follow.pending());
    heard.push(event(
        50,
        Engine::Vllm,
        Kind::WeightsLoaded,
        "vllm.weights",
        &[("weights_bytes", 15 * GIB)],
    ));
    assert!(follow.pending(), "a line heard: sample at once");
    follow.add(moment(60, 16 * GIB, &[(7, 10 * GIB)]));
    assert!(!follow.pending());
    // It held 16 GiB as it failed, and let go before the sample after its line.
    follow.add(moment(100, 16 * GIB, &[(7, 40 * GIB)]));
    heard.push(event(
        110,
        Engine::Vllm,
        Kind::OutOfMemory,
        "vllm.no_cache_blocks",
        &[],
    ));
    follow.add(moment(120, 0, &[(7, 40 * GIB)]));
    let r = follow.report(&who).unwrap();
    assert_eq!(r.ledger[0].driver_bytes, Some(16 * GIB));
    let f = r.failure.unwrap();
    assert_eq!(f.own_bytes, Some(16 * GIB));
    assert_eq!(f.others_bytes, Some(40 * GIB));
    // The phase up to the failure saw pid 7 grow by 30 GiB.
    assert_eq!(r.phases.last().unwrap().largest[0].bytes, i(30 * GIB));
}

/// A frame of one GPU: its figures and the driver's process list.
fn frame(free: u64, rows: &[(u32, u64)]) -> Frame {
    let info = GpuDeviceInfo::builder()
        .index(0)
        .total_bytes(140 * GIB)
        .free_bytes(free)
        .used_bytes(140 * GIB - free)
        .reserved_bytes(Some(600 * MIB))
        .build();
    let rows = rows
        .iter()
        .map(|&(pid, used)| {
            GpuProcessEntry::builder()
                .pid(pid)
                .device_index(0)
                .used_bytes(used)
                .build()
        })
        .collect();
    let mut d = DeviceFrame::default();
    (d.info, d.processes) = (Some(Ok(info)), Some(Ok(rows)));
    Frame::new(Duration::from_secs(1), Ok(1), vec![d], BTreeMap::new())
}

#[test]
fn a_frame_is_the_commands_processes_against_the_others() {
    // The command is pids 1 and 2 (an engine and its worker); 7 is another job.
    let tree: HashSet<u32> = [1, 2].into_iter().collect();
    let m = Moment::of(
        &frame(90 * GIB, &[(1, 512 * MIB), (2, 20 * GIB), (7, 29 * GIB)]),
        &tree,
    );
    let g = &m.gpus[&0];
    assert_eq!(g.own, 20 * GIB + 512 * MIB);
    assert_eq!(g.others, BTreeMap::from([(7, 29 * GIB)]));
    assert_eq!(
        (g.total, g.free, g.reserved),
        (Some(140 * GIB), Some(90 * GIB), Some(600 * MIB))
    );
    // A GPU whose processes could not be listed is not in the moment.
    let mut unlisted = frame(90 * GIB, &[]);
    unlisted.devices[0].processes = None;
    assert!(Moment::of(&unlisted, &tree).gpus.is_empty());
    // Follow::sample takes the frame's moment, on the lines' clock.
    let heard = Arc::new(Heard::new(Instant::now()));
    let mut follow = Follow::new(Arc::clone(&heard));
    heard.push(event(
        0,
        Engine::Vllm,
        Kind::WeightsLoaded,
        "vllm.weights",
        &[("weights_bytes", 20 * GIB)],
    ));
    follow.sample(&frame(90 * GIB, &[(1, 20 * GIB + 512 * MIB)]), &tree);
    let r = follow.report(&who).unwrap();
    assert_eq!(r.ledger[0].driver_bytes, Some(20 * GIB + 512 * MIB));
    assert_eq!(r.ledger[0].gap_bytes, Some(i(512 * MIB)));
}

#[test]
fn the_engine_is_the_one_that_said_most_and_its_gpu_where_it_held_most() {
    let vllm = event(
        10,
        Engine::Vllm,
        Kind::WeightsLoaded,
        "vllm.weights",
        &[("weights_bytes", GIB)],
    );
    let sglang = event(
        20,
        Engine::Sglang,
        Kind::WeightsLoaded,
        "sglang.load_end",
        &[("weights_bytes", GIB)],
    );
    // Two GPUs: the command holds 1 GiB on GPU 0, then 30 GiB on GPU 1 (and 2 GiB on GPU 0).
    let two = |at: u64, own0: u64, own1: u64| {
        let mut m = moment(at, own0, &[]);
        let mut g1 = m.gpus[&0].clone();
        g1.own = own1;
        m.gpus.insert(1, g1);
        m
    };
    let (first, second, third) = (
        two(15, GIB, 0),
        two(25, 2 * GIB, 30 * GIB),
        two(35, 2 * GIB, 30 * GIB),
    );
    let r = build(
        &[vllm.clone(), vllm.clone(), sglang],
        &[Some(&first), Some(&second), Some(&third)],
        None,
        &who,
    )
    .unwrap();
    assert_eq!(
        r.engine,
        Engine::Vllm,
        "two lines of vLLM's against one of SGLang's"
    );
    assert_eq!(r.gpu, Some(1));
    let r = build(std::slice::from_ref(&vllm), &[Some(&first)], None, &who).unwrap();
    assert_eq!(r.gpu, Some(0));
    // The largest, not the last listed; a tie goes to the first.
    let r = build(
        std::slice::from_ref(&vllm),
        &[Some(&two(15, 30 * GIB, 2 * GIB))],
        None,
        &who,
    )
    .unwrap();
    assert_eq!(r.gpu, Some(0));
    let r = build(
        std::slice::from_ref(&vllm),
        &[Some(&two(15, 3 * GIB, 3 * GIB))],
        None,
        &who,
    )
    .unwrap();
    assert_eq!(r.gpu, Some(0));
    // Nothing held anywhere: the GPU its failure names.
    let failed = Event {
        figures: BTreeMap::from([("device", Figure::Number(1.0))]),
        ..event(
            15,
            Engine::Vllm,
            Kind::OutOfMemory,
            "vllm.free_below_utilization",
            &[],
        )
    };
    let r = build(&[failed], &[Some(&two(20, 0, 0))], None, &who).unwrap();
    assert_eq!(r.gpu, Some(1));
}

#[test]
fn a_profiling_error_says_how_much_free_memory_rose() {
    let e = event(
        10,
        Engine::Vllm,
        Kind::OutOfMemory,
        "vllm.profiling_error",
        &[
            ("free_before_bytes", 100 * GIB),
            ("free_after_bytes", 112 * GIB + 512 * MIB),
        ],
    );
    let at = moment(20, 16 * GIB, &[(7, 2 * GIB)]);
    let f = build(&[e], &[Some(&at)], None, &who)
        .unwrap()
        .failure
        .unwrap();
    assert_eq!(
        f.fits.freed_while_profiling_bytes,
        Some(12 * GIB + 512 * MIB)
    );
    assert_eq!((f.fits.utilization, f.fits.short_bytes), (None, None));
}
