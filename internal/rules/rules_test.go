package rules

import "testing"

func TestRoundSize(t *testing.T) {
	var four, list Divisions
	for i := range four {
		four[i] = 4
	}
	// roundup_power2_divisions:[256:2,512:4,1024:8,>:16] as PyTorch fills it.
	for i := range list {
		switch {
		case i <= 8:
			list[i] = 2
		case i == 9:
			list[i] = 4
		case i == 10:
			list[i] = 8
		default:
			list[i] = 16
		}
	}
	const MiB = 1 << 20
	for _, tt := range []struct {
		n    uint64
		divs *Divisions
		want uint64
	}{
		{1, nil, 512}, {512, nil, 512}, {513, nil, 1024}, {1200, nil, 1536}, {3*MiB + 1, nil, 3*MiB + 512},
		{1200, &four, 1536}, // 1200 <= 512*4: plain 512 rounding
		{2049, &four, 2560}, {5000, &four, 5120}, {1 << 20, &four, 1 << 20}, {MiB + 1, &four, MiB + 256<<10},
		{3*MiB + 1, &four, 3*MiB + 512<<10}, {5 * MiB, &four, 5 * MiB}, {4 * MiB, &four, 4 * MiB},
		{3*MiB + 1, &list, 4 * MiB}, {600 * MiB, &list, 640 * MiB}, {1100 * MiB, &list, 1152 * MiB}, {2100 * MiB, &list, 2176 * MiB},
		{40 << 30, &list, 40 << 30}, {(40 << 30) + 1, &list, 42 << 30},
	} {
		if got := RoundSize(tt.n, tt.divs); got != tt.want {
			t.Errorf("RoundSize(%d, %v) = %d, want %d", tt.n, tt.divs, got, tt.want)
		}
	}
	// The example in the comment above roundup_power2_next_division.
	if got := RoundupPower2NextDivision(1200, 4); got != 1280 {
		t.Errorf("RoundupPower2NextDivision(1200, 4) = %d, want 1280", got)
	}
}

func TestIndex(t *testing.T) {
	for _, tt := range []struct {
		mib uint64
		i   int
		ok  bool
	}{{1, 0, true}, {2, 1, true}, {256, 8, true}, {32768, 15, true}, {65536, 15, true}, {0, 0, false}, {3, 0, false}} {
		if i, ok := Index(tt.mib); i != tt.i || ok != tt.ok {
			t.Errorf("Index(%d) = %d, %v; want %d, %v", tt.mib, i, ok, tt.i, tt.ok)
		}
	}
}

func TestFragmentation(t *testing.T) {
	for _, tt := range []struct {
		largest, free uint64
		want          float64
	}{{0, 0, 0}, {10, 10, 0}, {1, 4, 0.75}, {0, 8, 1}} {
		if got := Fragmentation(tt.largest, tt.free); got != tt.want {
			t.Errorf("Fragmentation(%d, %d) = %g, want %g", tt.largest, tt.free, got, tt.want)
		}
	}
}

func TestAllocationSize(t *testing.T) {
	const MiB = 1 << 20
	for _, tt := range []struct{ size, large, want uint64 }{
		{512, LargeBuffer, 2 * MiB}, {MiB, LargeBuffer, 2 * MiB}, // small pool
		{MiB + 512, LargeBuffer, 20 * MiB}, {10*MiB - 512, LargeBuffer, 20 * MiB},
		{MiB + 512, 64 * MiB, 64 * MiB}, // large_segment_size_mb:64
		{10 * MiB, LargeBuffer, 10 * MiB}, {10*MiB + 512, LargeBuffer, 12 * MiB},
	} {
		if got := AllocationSize(tt.size, tt.large); got != tt.want {
			t.Errorf("AllocationSize(%d, %d) = %d, want %d", tt.size, tt.large, got, tt.want)
		}
	}
}

// TestBuckets: the buckets cover the range in order, none empty, and
// BucketOf finds the bucket holding each event.
func TestBuckets(t *testing.T) {
	for _, i0 := range []int{0, 7} {
		for span := 1; span <= 40; span++ {
			for n := 1; n <= span; n++ {
				b := Buckets(i0, i0+span, n)
				if len(b) != n+1 || b[0] != int32(i0) || b[n] != int32(i0+span) {
					t.Fatalf("Buckets(%d, %d, %d) = %v", i0, i0+span, n, b)
				}
				for k := 0; k < n; k++ {
					if b[k+1] <= b[k] {
						t.Fatalf("Buckets(%d, %d, %d) = %v: bucket %d empty", i0, i0+span, n, b, k)
					}
					for i := b[k]; i < b[k+1]; i++ {
						if got := BucketOf(int(i), i0, i0+span, n); got != k {
							t.Fatalf("BucketOf(%d, %d, %d, %d) = %d, want %d (%v)", i, i0, i0+span, n, got, k, b)
						}
					}
				}
			}
		}
	}
}
