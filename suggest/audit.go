// SPDX-License-Identifier: Apache-2.0

package suggest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/sluice-dev/sluice/audit"
)

// MaxAuditLine bounds one audit log line: the daemon's are well under it
// (a session_started line with a large allowlist is the longest).
const MaxAuditLine = 4 << 20

// FromAudit reads audit lines: the refusals of the chosen sessions
// (all when sessions is empty) into a suggestion, and the entries their
// session_started lines name. seen says which sessions had lines.
func FromAudit(r io.Reader, sessions []string) (sug *Suggestion, entries []string, seen map[string]bool, err error) {
	sug, seen = ForHost(), map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxAuditLine)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var e audit.Event
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, nil, nil, fmt.Errorf("line %d: not an audit event: %w", n, err)
		}
		if e.Type == "" {
			return nil, nil, nil, fmt.Errorf("line %d: not an audit event: no \"type\"", n)
		}
		if e.Session == "" || (len(sessions) > 0 && !slices.Contains(sessions, e.Session)) {
			continue
		}
		seen[e.Session] = true
		if e.Type == audit.SessionStarted {
			entries = append(entries, e.Entries...)
		}
		sug.AddEvent(e)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, nil, err
	}
	return sug, entries, seen, nil
}
