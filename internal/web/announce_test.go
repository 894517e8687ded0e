package web

import "testing"

func TestAnnounce(t *testing.T) {
	for _, tc := range []struct {
		bound            string
		hosts            []string
		loop             bool
		snaps, logs      int
		wantURL, serving string
	}{
		{"127.0.0.1:8080", nil, true, 2, 0, "http://127.0.0.1:8080/", "gpumem: serving 2 snapshot(s) at http://127.0.0.1:8080/ (Ctrl-C to stop)\n"},
		{"0.0.0.0:9000", []string{"box.lan"}, false, 1, 1, "http://box.lan:9000/", "gpumem: serving 1 snapshot(s) at http://box.lan:9000/, 1 watch log(s) at http://box.lan:9000/watch.html (Ctrl-C to stop)\n"},
		{"127.0.0.1:80", []string{"box.lan"}, true, 0, 3, "http://127.0.0.1:80/watch.html", "gpumem: serving 3 watch log(s) at http://127.0.0.1:80/watch.html (Ctrl-C to stop)\n"},
	} {
		a := Announce(tc.bound, tc.hosts, tc.loop, tc.snaps, tc.logs)
		if a.URL != tc.wantURL || a.Serving != tc.serving {
			t.Errorf("Announce(%q, %v, %v, %d, %d) = %q, %q; want %q, %q", tc.bound, tc.hosts, tc.loop, tc.snaps, tc.logs, a.URL, a.Serving, tc.wantURL, tc.serving)
		}
	}
	if got, want := Announce("127.0.0.1:1", nil, true, 1, 0).Loading(1), "gpumem: loading 1 snapshot(s); the viewer is at http://127.0.0.1:1/ (Ctrl-C to stop)\n"; got != want {
		t.Errorf("Loading = %q, want %q", got, want)
	}
}
