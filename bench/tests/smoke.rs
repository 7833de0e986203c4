//! `make test`'s check of the benchmark: the quick benchmark on tiny sizes
//! completes against a real server and produces every row of every table.
//! No timing is asserted (the numbers at this size mean nothing).

use hashlock_bench::plan::{Mode, Plan};
use hashlock_bench::report;
use hashlock_bench::run::{self, Options};
use hashlock_bench::svg;
use testkit::Kind;

#[test]
fn smoke_benchmark_produces_every_row() {
    let opts = Options {
        plan: Plan::for_mode(Mode::Smoke),
        kind: Kind::Redis,
        only: Vec::new(),
        pin: true,
        progress: false,
        holder_exe: env!("CARGO_BIN_EXE_hashlock-bench").into(),
        clients_before: None,
    };
    let results = match run::run(&opts) {
        Ok(r) => r,
        Err(e) => panic!("smoke benchmark failed: {e:#}"),
    };

    let missing = report::missing_rows(&results);
    assert!(missing.is_empty(), "rows missing: {missing:?}");

    let md = report::markdown(&results, Some(report::SVG_NAME));
    for heading in [
        "## Targets for hashlock",
        "## B1",
        "### Server cost per command",
        "### Throughput",
        "## B2",
        "## B3",
        "## B4",
        "## B6",
        "## B8",
        "### Fencing token cost",
        "## B7",
        "## B9",
        "## B10",
        "## B11",
        "## B12",
        "## B13",
        "## B14",
        "## B15",
        "## B16",
    ] {
        assert!(md.contains(heading), "report lacks {heading:?}:\n{md}");
    }
    // Every target row is there, met or missed, none "not run".
    let targets = report::targets(&results);
    assert!(targets.len() >= 10, "only {} targets", targets.len());
    assert!(
        targets.iter().all(|t| t.verdict != report::Verdict::NotRun),
        "a target could not be evaluated:\n{md}"
    );
    let readme = report::readme_section(&results);
    assert!(readme.starts_with("## Performance"), "{readme}");
    // The family's README regions: filled where the markers are, and a
    // README without them (the sections not written yet) is left alone.
    let regions = report::readme_regions(&results);
    for name in ["semaphores", "rwlocks"] {
        let text = &regions.iter().find(|(n, _)| *n == name).expect(name).1;
        assert!(text.contains("| "), "region {name} has no table:\n{text}");
    }
    let base = "<!-- bench:begin performance -->\n<!-- bench:end performance -->\n\
                <!-- bench:begin clients -->\n<!-- bench:end clients -->\n\
                <!-- bench:begin targets -->\n<!-- bench:end targets -->\n";
    let without = report::apply_regions(base, &regions).expect("optional regions may be absent");
    assert!(!without.contains("bench:begin semaphores"));
    let with = format!(
        "{base}## Semaphores\n<!-- bench:begin semaphores -->\nold\n<!-- bench:end semaphores -->\n\
         ## Read-write locks\n<!-- bench:begin rwlocks -->\n<!-- bench:end rwlocks -->\n"
    );
    let filled = report::apply_regions(&with, &regions).expect("regions filled");
    assert!(!filled.contains("\nold\n"), "{filled}");
    assert!(filled.contains("SEMAPHORE.ACQUIRE") && filled.contains("MACQUIRE"));

    let chart = svg::b3_wait_chart(
        &results.b3,
        &results.plan.b3_clients,
        &results.plan.b3_holds,
    );
    assert!(chart.starts_with("<svg") && chart.trim_end().ends_with("</svg>"));
    let lines = chart.matches("<polyline").count();
    assert_eq!(lines, results.b3.len(), "one line per B3 row");
}
