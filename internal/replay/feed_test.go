package replay

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

// TestFedLayoutMatches decodes every real snapshot with an EventFeed and
// checks that the layout done while decoding (pairing and stack) gives the
// same timeline as the one done after.
func TestFedLayoutMatches(t *testing.T) {
	used := 0
	files := corpus.Files(t)
	for _, path := range files {
		var fp *FedLayout
		s, err := snapshot.Open(path, &snapshot.Options{Feed: func(f *snapshot.EventFeed) {
			fp = LayoutFeed(f, func(pair func()) { go pair() })
		}})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if fp == nil {
			continue // JSON: no feed
		}
		d := s.DefaultDevice()
		if d < 0 || d >= len(s.Traces) {
			continue
		}
		pre := fp.take(s.Traces[d].Events)
		if pre == nil {
			continue // no entries, or several traces in the feed
		}
		used++
		got := newTimeline(s, d, KindActive, pre)
		want := newTimeline(s, d, KindActive, nil)
		name := filepath.Base(path)
		for _, c := range []struct {
			what      string
			got, want any
		}{
			{"elements", got.src, want.src}, {"starts", got.start, want.start}, {"ends", got.end, want.end},
			{"bottom edges", got.off0, want.off0}, {"positions", got.pos, want.pos}, {"slides", got.slid, want.slid},
			{"frees", got.freed, want.freed}, {"stack order", got.byPos, want.byPos},
			{"slid frees", [][]int32{got.freeEnd, got.freeID, got.freePos}, [][]int32{want.freeEnd, want.freeID, want.freePos}},
			{"runs", got.cruns.code, want.cruns.code}, {"run checkpoints", got.cruns.cp, want.cruns.cp},
			{"timesteps and peak", []uint64{uint64(got.timesteps), got.peak}, []uint64{uint64(want.timesteps), want.peak}},
		} {
			if !reflect.DeepEqual(c.got, c.want) {
				t.Errorf("%s: the fed layout's %s differ", name, c.what)
			}
		}
		if fp.take(s.Traces[d].Events) != nil {
			t.Errorf("%s: a pairing was taken twice", filepath.Base(path))
		}
	}
	t.Logf("%d of %d snapshots laid out from the fed pairing", used, len(files))
	if used < len(files)/2 {
		t.Errorf("only %d of %d snapshots used the fed pairing", used, len(files))
	}
}
