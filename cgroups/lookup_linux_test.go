// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"os/user"
	"slices"
	"testing"
)

func TestLookupUser(t *testing.T) {
	got, err := LookupUser("65534:65534")
	if err != nil || got.UID != 65534 || got.GID != 65534 || len(got.Groups) != 0 {
		t.Errorf("LookupUser(65534:65534) = %+v, %v", got, err)
	}
	// A numeric uid without an account is allowed.
	if _, err := user.LookupId("3999999"); err == nil {
		t.Skip("uid 3999999 unexpectedly has an account")
	}
	got, err = LookupUser("3999999")
	if err != nil || got.UID != 3999999 || got.GID != 3999999 || len(got.Groups) != 0 {
		t.Errorf("LookupUser(3999999) = %+v, %v", got, err)
	}
	if _, err := LookupUser("no-such-user-sluice"); err == nil {
		t.Error("LookupUser of an unknown name succeeded")
	}
}

func TestLookupUserByName(t *testing.T) {
	u, err := user.LookupId("0")
	if err != nil {
		t.Skipf("no account for uid 0: %v", err)
	}
	got, err := LookupUser(u.Username)
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != 0 || !slices.Contains(got.Groups, got.GID) {
		t.Errorf("LookupUser(%q) = %+v; want uid 0 with its primary group among its groups", u.Username, got)
	}
}
