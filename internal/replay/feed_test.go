package replay

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

// TestFedPairingMatches decodes every real snapshot with an EventFeed and
// checks that the pairing done while decoding gives the same elements,
// actions and initial stack as the one done after, and the same timeline.
func TestFedPairingMatches(t *testing.T) {
	used := 0
	files := corpus.Files(t)
	for _, path := range files {
		var fp *FedPairing
		s, err := snapshot.Open(path, &snapshot.Options{Feed: func(f *snapshot.EventFeed) {
			fp = PairFeed(f, func(pair func()) { go pair() })
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
			continue // several traces in the feed
		}
		used++
		got := buildElements(s, d, false, pre)
		want := buildElements(s, d, false, nil)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: fed pairing differs: %d/%d elements, %d/%d actions, %d/%d initial", filepath.Base(path),
				len(got.elems), len(want.elems), len(got.actions), len(want.actions), len(got.initial), len(want.initial))
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
