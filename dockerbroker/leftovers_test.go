// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestRemoveLeftovers: what a killed session of the same root left
// (container, network, volume) is removed; things of this session, of a
// live session, of another root and without sluice's labels stay; the
// engine's list is asked with the root's label filter.
func TestRemoveLeftovers(t *testing.T) {
	dir := t.TempDir()
	enginePath := filepath.Join(dir, "engine.sock")
	l, err := net.Listen("unix", enginePath)
	if err != nil {
		t.Fatal(err)
	}
	lab := func(root, session string) map[string]string {
		m := map[string]string{}
		if root != "" {
			m[RootLabel] = root
		}
		if session != "" {
			m[SessionLabel] = session
		}
		return m
	}
	type obj struct {
		ID     string `json:"Id"`
		Name   string `json:"Name,omitempty"`
		Labels map[string]string
	}
	// The engine answers with everything: the broker must not rely on
	// the filter alone.
	all := []obj{
		{ID: "c-dead", Labels: lab("sluice", "run-dead")},
		{ID: "c-self", Labels: lab("sluice", "run-self")},
		{ID: "c-live", Labels: lab("sluice", "run-live")},
		{ID: "c-other-root", Labels: lab("sluice-other", "run-dead")},
		{ID: "c-plain", Labels: lab("", "")},
		{ID: "c-norootlabel", Labels: lab("", "run-dead")},
	}
	var mu sync.Mutex
	var deleted, filters []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == "DELETE" {
			deleted = append(deleted, r.URL.Path)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		filters = append(filters, r.URL.Query().Get("filters"))
		switch r.URL.Path {
		case "/containers/json":
			_ = json.NewEncoder(w).Encode(all)
		case "/networks":
			_ = json.NewEncoder(w).Encode([]obj{{ID: "n-dead", Labels: lab("sluice", "run-dead")}, {ID: "n-live", Labels: lab("sluice", "run-live")}})
		case "/volumes":
			_ = json.NewEncoder(w).Encode(map[string]any{"Volumes": []obj{{Name: "v-dead", Labels: lab("sluice", "run-dead")}, {Name: "v-self", Labels: lab("sluice", "run-self")}}})
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	b := New(Config{Scope: Scope{Session: "run-self", Root: "sluice"}, Engine: enginePath})
	gone, err := b.RemoveLeftovers(context.Background(), func(s string) bool { return s == "run-live" })
	if err != nil {
		t.Fatal(err)
	}
	want := []Leftover{{"container", "c-dead", "run-dead"}, {"network", "n-dead", "run-dead"}, {"volume", "v-dead", "run-dead"}}
	if !slices.Equal(gone, want) {
		t.Errorf("removed %v, want %v", gone, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(deleted, []string{"/containers/c-dead", "/networks/n-dead", "/volumes/v-dead"}) {
		t.Errorf("engine deletes %v", deleted)
	}
	for _, f := range filters {
		if !strings.Contains(f, `"sluice.root=sluice"`) {
			t.Errorf("a list without the root's label filter: %q", f)
		}
	}
	// A broker with no root removes nothing.
	if gone, err := New(Config{Scope: Scope{Session: "x"}, Engine: enginePath}).RemoveLeftovers(context.Background(), func(string) bool { return false }); err != nil || len(gone) != 0 {
		t.Errorf("with no root: %v %v", gone, err)
	}
}
