package main

import (
	"errors"
	"os"

	"github.com/sluice-dev/sluice/enforcer"
)

func cleanup(stateDir string) error {
	if os.Geteuid() != 0 {
		return errors.New("cleanup needs root")
	}
	cfg, err := enforcer.ConfigFromEnv()
	if err != nil {
		return err
	}
	if stateDir != "" {
		cfg.StateDir = stateDir
	}
	return enforcer.Cleanup(cfg)
}
