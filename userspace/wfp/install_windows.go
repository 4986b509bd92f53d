// SPDX-License-Identifier: Apache-2.0

//go:build sluice_wfp && (amd64 || arm64)

package wfp

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Install adds filters to a new dynamic WFP session, in one transaction,
// under a fresh sublayer of its own. Closing the returned Closer closes the
// session, and the Base Filtering Engine deletes the sublayer and every
// filter with it; so does the process ending in any way. Needs
// administrator rights.
func Install(filters []Filter) (io.Closer, error) {
	if len(filters) == 0 {
		return nil, errors.New("wfp: no filters to install")
	}
	for _, f := range filters {
		if err := f.check(); err != nil {
			return nil, err
		}
	}
	if err := load(); err != nil {
		return nil, err
	}
	var b builder
	name, err := windows.UTF16PtrFromString("sluice")
	if err != nil {
		return nil, fmt.Errorf("wfp: %w", err)
	}
	session := &fwpmSession0{flags: fwpmSessionFlagDynamic, displayData: fwpmDisplayData0{name: name}}
	e := &engine{}
	if err := fwpmEngineOpen0(session, &e.handle); err != nil {
		return nil, err
	}
	runtime.KeepAlive(session)

	err = e.transact(func() error {
		key, err := windows.GenerateGUID()
		if err != nil {
			return fmt.Errorf("wfp: sublayer key: %w", err)
		}
		sub := &fwpmSublayer0{subLayerKey: key, displayData: fwpmDisplayData0{name: name}, weight: sublayerWeight}
		if err := fwpmSubLayerAdd0(e.handle, sub); err != nil {
			return err
		}
		runtime.KeepAlive(sub)
		for _, f := range filters {
			ff, err := b.filter(f, key)
			if err != nil {
				return err
			}
			id := new(uint64)
			if err := fwpmFilterAdd0(e.handle, ff, id); err != nil {
				return fmt.Errorf("%w (filter %q)", err, f.Name)
			}
		}
		runtime.KeepAlive(&b)
		return nil
	})
	if err != nil {
		// Closing the dynamic session also drops whatever the aborted
		// transaction left.
		return nil, errors.Join(err, e.Close())
	}
	return e, nil
}

// engine is an open dynamic session; its filters live as long as it does.
type engine struct {
	handle windows.Handle
	once   sync.Once
	err    error
}

// Close ends the session, which removes its filters. Later calls return
// the first call's result.
func (e *engine) Close() error {
	e.once.Do(func() { e.err = fwpmEngineClose0(e.handle) })
	return e.err
}

// transact runs fn in a WFP transaction: all its objects, or none.
func (e *engine) transact(fn func() error) error {
	if err := fwpmTransactionBegin0(e.handle); err != nil {
		return err
	}
	if err := fn(); err != nil {
		return errors.Join(err, fwpmTransactionAbort0(e.handle))
	}
	if err := fwpmTransactionCommit0(e.handle); err != nil {
		return errors.Join(err, fwpmTransactionAbort0(e.handle))
	}
	return nil
}

// builder turns Filters into FWPM_FILTER0s. A condition value that points
// at Go memory is stored in a uintptr, which the garbage collector does not
// follow, so the builder keeps every such object reachable until the
// caller's runtime.KeepAlive after the last API call.
type builder struct {
	keep []any
}

// filter converts f, which has passed check, into sluice's sublayer.
func (b *builder) filter(f Filter, sublayer windows.GUID) (*fwpmFilter0, error) {
	conds := make([]fwpmFilterCondition0, len(f.Conditions))
	for i, c := range f.Conditions {
		field, ok := conditionKeys[c.Field]
		if !ok {
			return nil, fmt.Errorf("wfp: %s: no key for field %s", f.Name, c.Field)
		}
		match, ok := matchTypes[c.Match]
		if !ok {
			return nil, fmt.Errorf("wfp: %s: no match type %s", f.Name, c.Match)
		}
		conds[i] = fwpmFilterCondition0{fieldKey: field.key, matchType: match, conditionValue: fwpValue0{typ: field.typ}}
		if field.typ != fwpSecurityDescriptor {
			conds[i].conditionValue.value = uintptr(c.Value)
			continue
		}
		sd, err := windows.SecurityDescriptorFromString(c.SDDL)
		if err != nil {
			return nil, fmt.Errorf("wfp: %s: security descriptor %q: %w", f.Name, c.SDDL, err)
		}
		blob := &fwpByteBlob{size: sd.Length(), data: (*byte)(unsafe.Pointer(sd))}
		b.keep = append(b.keep, sd, blob)
		conds[i].conditionValue.value = uintptr(unsafe.Pointer(blob))
	}
	name, err := windows.UTF16PtrFromString(f.Name)
	if err != nil {
		return nil, fmt.Errorf("wfp: filter name %q: %w", f.Name, err)
	}
	ff := &fwpmFilter0{
		displayData:         fwpmDisplayData0{name: name},
		layerKey:            layerKeys[f.Layer],
		subLayerKey:         sublayer,
		weight:              fwpValue0{typ: fwpUint8, value: uintptr(f.Weight)},
		numFilterConditions: uint32(len(conds)),
		filterCondition:     &conds[0],
		action:              fwpmAction0{typ: fwpActionPermit},
	}
	if f.Action == actionBlock {
		// A hard block: a permit in a lower-priority sublayer (a Windows
		// Firewall allow rule) cannot override it.
		ff.action.typ = fwpActionBlock
		ff.flags = fwpmFilterFlagClearActionRight
	}
	b.keep = append(b.keep, conds, ff)
	return ff, nil
}
