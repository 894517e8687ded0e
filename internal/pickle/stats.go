package pickle

// Stats reports table sizes (for tests and benchmarks).
func (d *Decoder) Stats() (containers, free, memo int) {
	return int(d.nconts), len(d.free), int(d.memoLen) + len(d.memoMap)
}
