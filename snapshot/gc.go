package snapshot

// HoldEagerGC keeps the decode's eager collection (see eagerGC)
// on for the work that follows the decode of an input of size bytes, and
// returns what lets it go. The command line's answers (info's timeline
// peaks, stats, peak) make arrays as large as a tenth of the model; at the
// default GOGC 100 the garbage of the first could wait for a collection
// until the heap had doubled, so that on a 264 MB tile `gpumem info`
// peaked 60 MiB above its live data. The model itself is pointer-free
// columns, which a collection does not scan: collecting more often costs
// little CPU. Inputs under 64 MB leave the setting alone.
func HoldEagerGC(size int64) (release func()) {
	return eagerGC(size)
}

// eagerGCPercent is the GOGC of eagerGC. The heap of a big decode is
// nearly all pointer-free columns (events, blocks, segments), which a
// collection does not scan, so that a cycle costs a few milliseconds
// whatever the input's size; each percent of headroom, on the other
// hand, is a percent of the file in resident memory at the peak: with
// the hold, `gpumem info` on a 264 MB tile peaked at 363-371 MiB at 25
// and 341-368 MiB at 10 (bench/RESULTS.md, #32).
const eagerGCPercent = 10
