package alloc

import (
	"sort"
)

// Stat is c10's Stat: current value, peak since start, and cumulative
// increases (Allocated) and decreases (Freed).
type Stat struct {
	Current, Peak, Allocated, Freed int64
}

func (s *Stat) inc(n uint64) {
	s.Current += int64(n)
	s.Peak = max(s.Peak, s.Current)
	s.Allocated += int64(n)
}

func (s *Stat) dec(n uint64) {
	s.Current -= int64(n)
	s.Freed += int64(n)
}

// Pool indexes a StatArray like c10's StatType.
type Pool int

// StatType order: AGGREGATE, SMALL_POOL, LARGE_POOL.
const (
	PoolAll Pool = iota
	PoolSmall
	PoolLarge
)

var poolNames = [...]string{"all", "small_pool", "large_pool"}

// StatArray is one Stat per Pool.
type StatArray [3]Stat

func (a *StatArray) inc(small bool, n uint64) {
	a[PoolAll].inc(n)
	if small {
		a[PoolSmall].inc(n)
	} else {
		a[PoolLarge].inc(n)
	}
}

func (a *StatArray) dec(small bool, n uint64) {
	a[PoolAll].dec(n)
	if small {
		a[PoolSmall].dec(n)
	} else {
		a[PoolLarge].dec(n)
	}
}

// MemoryStats is c10's DeviceStats, what torch.cuda.memory_stats() reports.
type MemoryStats struct {
	Allocation         StatArray // allocation.*: allocated blocks
	Segment            StatArray // segment.*: cudaMalloc'd segments
	Active             StatArray // active.*: allocated or pending-free blocks
	InactiveSplit      StatArray // inactive_split.*: free blocks in split segments
	AllocatedBytes     StatArray
	ReservedBytes      StatArray
	ActiveBytes        StatArray
	InactiveSplitBytes StatArray
	RequestedBytes     StatArray

	OversizeAllocations Stat
	OversizeSegments    Stat

	NumAllocRetries   int64
	NumOOMs           int64
	NumSyncAllStreams int64
	NumDeviceAlloc    int64
	NumDeviceFree     int64
	// MaxSplitSize is -1 when unlimited.
	MaxSplitSize int64
}

var statFields = [...]string{"current", "peak", "allocated", "freed"}

func (s Stat) values() [4]int64 { return [4]int64{s.Current, s.Peak, s.Allocated, s.Freed} }

// Map flattens the stats with torch.cuda.memory_stats()'s key names
// ("allocated_bytes.all.current", ...): 122 keys.
func (s *MemoryStats) Map() map[string]int64 {
	m := make(map[string]int64, 122)
	arrays := []struct {
		name string
		a    *StatArray
	}{
		{"allocation", &s.Allocation}, {"segment", &s.Segment}, {"active", &s.Active},
		{"inactive_split", &s.InactiveSplit}, {"allocated_bytes", &s.AllocatedBytes},
		{"reserved_bytes", &s.ReservedBytes}, {"active_bytes", &s.ActiveBytes},
		{"inactive_split_bytes", &s.InactiveSplitBytes}, {"requested_bytes", &s.RequestedBytes},
	}
	for _, a := range arrays {
		for p, pn := range poolNames {
			v := a.a[p].values()
			for f, fn := range statFields {
				m[a.name+"."+pn+"."+fn] = v[f]
			}
		}
	}
	for _, o := range []struct {
		name string
		s    Stat
	}{{"oversize_allocations", s.OversizeAllocations}, {"oversize_segments", s.OversizeSegments}} {
		v := o.s.values()
		for f, fn := range statFields {
			m[o.name+"."+fn] = v[f]
		}
	}
	m["num_alloc_retries"] = s.NumAllocRetries
	m["num_ooms"] = s.NumOOMs
	m["num_sync_all_streams"] = s.NumSyncAllStreams
	m["num_device_alloc"] = s.NumDeviceAlloc
	m["num_device_free"] = s.NumDeviceFree
	m["max_split_size"] = s.MaxSplitSize
	return m
}

// StatKeys returns the 122 memory_stats keys in PyTorch's (sorted) order.
func StatKeys() []string {
	var s MemoryStats
	m := s.Map()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
