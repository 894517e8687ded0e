package pickle

import (
	"encoding/binary"
	"testing"
)

// intRun is a MemoRun of ints from base on.
type intRun struct{ base int64 }

func (r intRun) MemoValue(k uint64) Value { return MakeInt(r.base + int64(k)) }

// runSplitter memoizes n entries as a run at the MARK at offset at, and
// skips to skip.
type runSplitter struct {
	at, skip int
	n        uint64
	ok       bool
	plain    []Value // MemoPlain of some of the run's entries, after it
}

func (s *runSplitter) SplitAt() int64 { return int64(s.at) }

func (s *runSplitter) Split(d *Decoder) (bool, error) {
	if s.n < 2 {
		s.ok = d.MemoizeRun(s.n, intRun{1000})
	} else { // two runs, one after the other
		s.ok = d.MemoizeRun(s.n/2, intRun{1000}) && d.MemoizeRun(s.n-s.n/2, intRun{1000 + int64(s.n/2)})
	}
	for _, i := range []uint64{1, s.n / 2, s.n} {
		v, _ := d.MemoPlain(i)
		s.plain = append(s.plain, v)
	}
	d.SkipTo(s.skip)
	return true, nil
}

// TestMemoizeRun: memo entries kept as a run read as MEMOIZEd ones (by
// BINGET, LONG_BINGET and MemoPlain); a PUT over one replaces it without
// counting a new entry, and MEMOIZEs after the run number on from its end,
// across memo pages of their own and shared.
func TestMemoizeRun(t *testing.T) {
	for _, n := range []uint64{1, 1000, 65535, 65536 * 3, 65536*3 - 1} {
		b := []byte{0x80, 4, ']', 0x94, '('} // the list is memo entry 0
		at := len(b) - 1
		b = append(b, "garbage the splitter read"...)
		skip := len(b)
		get := func(i uint64) {
			if i < 256 {
				b = append(b, 'h', byte(i))
				return
			}
			b = append(b, 'j', 0, 0, 0, 0)
			binary.LittleEndian.PutUint32(b[len(b)-4:], uint32(i))
		}
		b = append(b, '(')
		want := []int64{}
		for _, i := range []uint64{1, 2, n / 2, n/2 + 1, n} {
			if i >= 1 && i <= n {
				get(i)
				want = append(want, 1000+int64(i-1))
			}
		}
		// A PUT over entry n/2+1 (or 1): replaced, no new entry.
		over := max(n/2+1, 1)
		if over > n {
			over = n
		}
		b = append(b, 'K', 7, 'r', 0, 0, 0, 0)
		binary.LittleEndian.PutUint32(b[len(b)-4:], uint32(over))
		get(over)
		b = append(b, 'K', 9, 0x94) // memo entry n+1
		get(n + 1)
		want = append(want, 7, 7, 9, 9)
		b = append(b, 'e', '.')

		sp := &runSplitter{at: at, skip: skip, n: n}
		d := NewBytesDecoder(b, nil)
		d.SetSplitter(sp)
		v, err := d.Decode()
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if !sp.ok {
			t.Fatalf("n=%d: MemoizeRun refused a dense memo", n)
		}
		items := d.Items(v)
		if len(items) != len(want) {
			t.Fatalf("n=%d: %d items, want %d", n, len(items), len(want))
		}
		for i, it := range items {
			if x, _ := it.Int(); x != want[i] {
				t.Errorf("n=%d: item %d is %d, want %d", n, i, x, want[i])
			}
		}
		for i, p := range sp.plain {
			k := []uint64{1, n / 2, n}[i]
			if x, ok := p.Int(); k >= 1 && (!ok || x != 1000+int64(k-1)) {
				t.Errorf("n=%d: MemoPlain(%d) = %v, want %d", n, k, p, 1000+int64(k-1))
			}
		}
		if d.MemoCount() != int(n)+2 {
			t.Errorf("n=%d: %d memo entries, want %d", n, d.MemoCount(), n+2)
		}
		for _, s := range holePage {
			if s != slotHole {
				t.Fatalf("n=%d: the shared page of holes was written", n)
			}
		}
	}
}

// TestMemoizeRunRefused: a memo with an entry far past its count (a
// PUT's, kept in the map) is not dense; MemoizeRun leaves it as it is.
func TestMemoizeRunRefused(t *testing.T) {
	d2 := NewBytesDecoder(nil, nil)
	d2.memoPut(1<<16, MakeInt(1))
	if d2.MemoizeRun(5, intRun{}) {
		t.Error("MemoizeRun took a memo with a hole below its count")
	}
	if d2.MemoizeRun(0, intRun{}) {
		t.Error("MemoizeRun took an empty run")
	}
}
