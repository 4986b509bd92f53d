// SPDX-License-Identifier: Apache-2.0

//go:build sluice_wfp && (amd64 || arm64)

package wfp

import (
	"unsafe"

	"golang.org/x/sys/windows"
)

// The structs below mirror fwptypes.h and fwpmtypes.h for 64-bit Windows.
// Unions are represented by their widest, most aligned member; the
// compile-time checks at the end turn any layout mistake into a build
// error rather than a corrupt filter.

// fwpValue0 is FWP_VALUE0 and FWP_CONDITION_VALUE0: a type tag and a union
// that holds UINT8/16/32 inline and everything else by pointer. value is a
// uintptr because it is sometimes an integer; when it points at Go memory,
// the builder keeps that memory alive (see install_windows.go).
type fwpValue0 struct {
	typ   uint32 // FWP_DATA_TYPE
	value uintptr
}

// fwpByteBlob is FWP_BYTE_BLOB.
type fwpByteBlob struct {
	size uint32
	data *byte
}

// fwpmDisplayData0 is FWPM_DISPLAY_DATA0.
type fwpmDisplayData0 struct {
	name        *uint16
	description *uint16
}

// fwpmFilterCondition0 is FWPM_FILTER_CONDITION0.
type fwpmFilterCondition0 struct {
	fieldKey       windows.GUID
	matchType      uint32 // FWP_MATCH_TYPE
	conditionValue fwpValue0
}

// fwpmAction0 is FWPM_ACTION0; the union of filterType and calloutKey is
// one GUID.
type fwpmAction0 struct {
	typ        uint32 // FWP_ACTION_TYPE
	filterType windows.GUID
}

// fwpmFilter0 is FWPM_FILTER0.
type fwpmFilter0 struct {
	filterKey           windows.GUID
	displayData         fwpmDisplayData0
	flags               uint32
	providerKey         *windows.GUID
	providerData        fwpByteBlob
	layerKey            windows.GUID
	subLayerKey         windows.GUID
	weight              fwpValue0
	numFilterConditions uint32
	filterCondition     *fwpmFilterCondition0
	action              fwpmAction0
	// union { UINT64 rawContext; GUID providerContextKey; }: the UINT64
	// makes it 8-aligned, which a GUID field would not be.
	providerContext [2]uint64
	reserved        *windows.GUID
	filterID        uint64
	effectiveWeight fwpValue0
}

// fwpmSession0 is FWPM_SESSION0.
type fwpmSession0 struct {
	sessionKey           windows.GUID
	displayData          fwpmDisplayData0
	flags                uint32
	txnWaitTimeoutInMSec uint32
	processID            uint32
	sid                  *windows.SID
	username             *uint16
	kernelMode           int32 // BOOL
}

// fwpmSublayer0 is FWPM_SUBLAYER0.
type fwpmSublayer0 struct {
	subLayerKey  windows.GUID
	displayData  fwpmDisplayData0
	flags        uint32
	providerKey  *windows.GUID
	providerData fwpByteBlob
	weight       uint16
}

// Constants from fwptypes.h, fwpmtypes.h and rpcdce.h.
const (
	fwpUint8              = 1  // FWP_UINT8
	fwpUint16             = 2  // FWP_UINT16
	fwpUint32             = 3  // FWP_UINT32
	fwpSecurityDescriptor = 14 // FWP_SECURITY_DESCRIPTOR_TYPE

	fwpMatchEqual       = 0 // FWP_MATCH_EQUAL
	fwpMatchFlagsAllSet = 6 // FWP_MATCH_FLAGS_ALL_SET

	fwpActionFlagTerminating = 0x00001000
	fwpActionBlock           = 0x1 | fwpActionFlagTerminating // FWP_ACTION_BLOCK
	fwpActionPermit          = 0x2 | fwpActionFlagTerminating // FWP_ACTION_PERMIT

	fwpmFilterFlagClearActionRight = 0x8 // FWPM_FILTER_FLAG_CLEAR_ACTION_RIGHT
	fwpmSessionFlagDynamic         = 0x1 // FWPM_SESSION_FLAG_DYNAMIC
	rpcCAuthnDefault               = 0xffffffff

	// sublayerWeight puts sluice's sublayer first in arbitration.
	sublayerWeight = 0xffff
)

// layerKeys are the FWPM_LAYER_* GUIDs (fwpmu.h).
var layerKeys = map[string]windows.GUID{
	layerConnectV4: {Data1: 0xc38d57d1, Data2: 0x05a7, Data3: 0x4c33, Data4: [8]byte{0x90, 0x4f, 0x7f, 0xbc, 0xee, 0xe6, 0x0e, 0x82}},
	layerConnectV6: {Data1: 0x4a72393b, Data2: 0x319f, Data3: 0x44bc, Data4: [8]byte{0x84, 0xc3, 0xba, 0x54, 0xdc, 0xb3, 0xb6, 0xb4}},
	layerAcceptV4:  {Data1: 0xe1cd9fe7, Data2: 0xf4b5, Data3: 0x4273, Data4: [8]byte{0x96, 0xc0, 0x59, 0x2e, 0x48, 0x7b, 0x86, 0x50}},
	layerAcceptV6:  {Data1: 0xa3b42c97, Data2: 0x9f04, Data3: 0x4672, Data4: [8]byte{0xb8, 0x7e, 0xce, 0xe9, 0xc4, 0x83, 0x25, 0x7f}},
}

// conditionKeys are the FWPM_CONDITION_* GUIDs (fwpmu.h) and the data type
// each field's value has.
var conditionKeys = map[string]struct {
	key windows.GUID
	typ uint32
}{
	fieldUserID:     {windows.GUID{Data1: 0xaf043a0a, Data2: 0xb34d, Data3: 0x4f86, Data4: [8]byte{0x97, 0x9c, 0xc9, 0x03, 0x71, 0xaf, 0x6e, 0x66}}, fwpSecurityDescriptor},
	fieldFlags:      {windows.GUID{Data1: 0x632ce23b, Data2: 0x5167, Data3: 0x435c, Data4: [8]byte{0x86, 0xd7, 0xe9, 0x03, 0x68, 0x4a, 0xa8, 0x0c}}, fwpUint32},
	fieldProtocol:   {windows.GUID{Data1: 0x3971ef2b, Data2: 0x623e, Data3: 0x4f9a, Data4: [8]byte{0x8c, 0xb1, 0x6e, 0x79, 0xb8, 0x06, 0xb9, 0xa7}}, fwpUint8},
	fieldRemotePort: {windows.GUID{Data1: 0xc35a604d, Data2: 0xd22b, Data3: 0x4e1a, Data4: [8]byte{0x91, 0xb4, 0x68, 0xf6, 0x74, 0xee, 0x67, 0x4b}}, fwpUint16},
}

// matchTypes maps the description's match names to FWP_MATCH_TYPE.
var matchTypes = map[string]uint32{
	matchEqual:       fwpMatchEqual,
	matchFlagsAllSet: fwpMatchFlagsAllSet,
}

// Layout checks against the C structs on 64-bit Windows. An array of
// length (x - n) assigned to a zero-length array compiles only when x == n.
var (
	_ [0]struct{} = [unsafe.Sizeof(fwpValue0{}) - 16]struct{}{}
	_ [0]struct{} = [unsafe.Sizeof(fwpByteBlob{}) - 16]struct{}{}
	_ [0]struct{} = [unsafe.Sizeof(fwpmFilterCondition0{}) - 40]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmFilterCondition0{}.conditionValue) - 24]struct{}{}
	_ [0]struct{} = [unsafe.Sizeof(fwpmAction0{}) - 20]struct{}{}

	_ [0]struct{} = [unsafe.Sizeof(fwpmFilter0{}) - 200]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmFilter0{}.flags) - 32]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmFilter0{}.providerKey) - 40]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmFilter0{}.layerKey) - 64]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmFilter0{}.subLayerKey) - 80]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmFilter0{}.weight) - 96]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmFilter0{}.numFilterConditions) - 112]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmFilter0{}.filterCondition) - 120]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmFilter0{}.action) - 128]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmFilter0{}.providerContext) - 152]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmFilter0{}.reserved) - 168]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmFilter0{}.filterID) - 176]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmFilter0{}.effectiveWeight) - 184]struct{}{}

	_ [0]struct{} = [unsafe.Sizeof(fwpmSession0{}) - 72]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmSession0{}.flags) - 32]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmSession0{}.processID) - 40]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmSession0{}.sid) - 48]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmSession0{}.kernelMode) - 64]struct{}{}

	_ [0]struct{} = [unsafe.Sizeof(fwpmSublayer0{}) - 72]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmSublayer0{}.providerData) - 48]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(fwpmSublayer0{}.weight) - 64]struct{}{}
)
