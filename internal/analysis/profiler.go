package analysis

// ProfilerReason is the category reason of an allocation whose category
// torch.profiler gave (a memory timeline export): used as given.
const ProfilerReason = "from torch.profiler"

// profilerCategories returns the categories torch.profiler assigned to
// d.Active's allocations (ok false when the file carries none: a
// snapshot, a Kineto trace). The profiler follows every tensor's data
// flow, which gpumem's stack evidence only approximates, so its word wins.
func profilerCategories(d *Device) ([]Category, bool) {
	s := d.S
	if s.Profiler == nil || !s.Profiler.Categories {
		return nil, false
	}
	byName := map[string]Category{}
	for _, c := range Categories() {
		byName[c.String()] = c
	}
	ev := d.Events()
	cats := make([]Category, d.Active.Len())
	for i := range d.Active.Len() {
		it := d.Active.Item(i)
		var e int
		switch {
		case it.Alloc >= 0 && int(it.Alloc) < len(ev):
			e = int(it.Alloc)
		case it.Free >= 0 && int(it.Free) < len(ev):
			e = int(it.Free)
		default:
			continue
		}
		if name, ok := s.ProfilerCategory(&s.Traces[d.Index], e); ok {
			cats[i] = byName[name]
		}
	}
	return cats, true
}

// CategorySource says where the categories of d come from when it is not
// gpumem's own classification: ProfilerReason for a memory timeline
// export, "" otherwise.
func (d *Device) CategorySource() string {
	if d.S.Profiler != nil && d.S.Profiler.Categories {
		return ProfilerReason
	}
	return ""
}
