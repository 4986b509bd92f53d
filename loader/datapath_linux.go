// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// DefaultPinDir is where sluice pins its maps and links.
const DefaultPinDir = "/sys/fs/bpf/sluice"

// attachment is one cgroup hook of the datapath.
type attachment struct {
	name   string // pin name of the link
	attach ebpf.AttachType
	prog   func(*sluiceObjects) *ebpf.Program
}

// isUnix reports the programs that judge unix sockets: optional, since
// kernels before 6.7 lack their hooks (see unix_linux.go).
func (a attachment) isUnix() bool {
	return a.attach == ebpf.AttachCgroupUnixConnect || a.attach == ebpf.AttachCgroupUnixSendmsg
}

var attachments = []attachment{
	{"link_connect4", ebpf.AttachCGroupInet4Connect, func(o *sluiceObjects) *ebpf.Program { return o.SluiceConnect4 }},
	{"link_connect6", ebpf.AttachCGroupInet6Connect, func(o *sluiceObjects) *ebpf.Program { return o.SluiceConnect6 }},
	{"link_sendmsg4", ebpf.AttachCGroupUDP4Sendmsg, func(o *sluiceObjects) *ebpf.Program { return o.SluiceSendmsg4 }},
	{"link_sendmsg6", ebpf.AttachCGroupUDP6Sendmsg, func(o *sluiceObjects) *ebpf.Program { return o.SluiceSendmsg6 }},
	{"link_sock_create", ebpf.AttachCGroupInetSockCreate, func(o *sluiceObjects) *ebpf.Program { return o.SluiceSockCreate }},
	{"link_setsockopt", ebpf.AttachCGroupSetsockopt, func(o *sluiceObjects) *ebpf.Program { return o.SluiceSetsockopt }},
	{"link_egress", ebpf.AttachCGroupInetEgress, func(o *sluiceObjects) *ebpf.Program { return o.SluiceEgress }},
	{"link_recvmsg4", ebpf.AttachCGroupUDP4Recvmsg, func(o *sluiceObjects) *ebpf.Program { return o.SluiceRecvmsg4 }},
	{"link_recvmsg6", ebpf.AttachCGroupUDP6Recvmsg, func(o *sluiceObjects) *ebpf.Program { return o.SluiceRecvmsg6 }},
	{"link_getpeername4", ebpf.AttachCgroupInet4GetPeername, func(o *sluiceObjects) *ebpf.Program { return o.SluiceGetpeername4 }},
	{"link_getpeername6", ebpf.AttachCgroupInet6GetPeername, func(o *sluiceObjects) *ebpf.Program { return o.SluiceGetpeername6 }},
	{"link_post_bind4", ebpf.AttachCGroupInet4PostBind, func(o *sluiceObjects) *ebpf.Program { return o.SluicePostBind4 }},
	{"link_post_bind6", ebpf.AttachCGroupInet6PostBind, func(o *sluiceObjects) *ebpf.Program { return o.SluicePostBind6 }},
	{"link_connect_unix", ebpf.AttachCgroupUnixConnect, func(o *sluiceObjects) *ebpf.Program { return o.SluiceConnectUnix }},
	{"link_sendmsg_unix", ebpf.AttachCgroupUnixSendmsg, func(o *sluiceObjects) *ebpf.Program { return o.SluiceSendmsgUnix }},
	{"link_sockops", ebpf.AttachCGroupSockOps, func(o *sluiceObjects) *ebpf.Program { return o.SluiceSockops }},
}

// Datapath is an open handle on the pinned datapath. Closing it releases
// this process's file descriptors only: the pinned links keep enforcing.
type Datapath struct {
	pinDir     string
	cgroupPath string
	objs       sluiceObjects
	links      []link.Link
	progs      []*ebpf.Program // in force, in the order of attachments
	reused     bool            // progs were opened by id, not loaded (see reuse)
	innerSpec  *ebpf.MapSpec
	// unixErr says why unix sockets are not judged on this kernel (nil:
	// they are).
	unixErr   error
	kdnsInner *ebpf.MapSpec // a session's kernel DNS ring buffer
	// kdnsErr says why the kernel DNS path's programs are not attached
	// (nil: they are); SetKDNS then refuses.
	kdnsErr error
	// kdnsProgs are the kernel DNS path's programs (egress, ingress), which
	// AttachKDNS attaches to the cgroups of kernel-path sessions only.
	kdnsProgs []*ebpf.Program
	// replaced are the pinned maps this Open found with another layout
	// and replaced (Replaced).
	replaced []string
}

// Replaced names the pinned maps Open found with another layout (left by
// an older sluice) and replaced with empty ones of this binary's layout.
func (d *Datapath) Replaced() []string { return d.replaced }

// replaceIncompatiblePins unpins every pinned map under pinDir whose
// layout is not the one spec declares, so that the next load creates it
// afresh, and names them. An upgrade that changes a map's key, value or
// size must not need a `sluice cleanup` (which unconfines every session):
// the old programs keep their references to the old maps and go on
// judging with them until the pinned links are updated to the new
// programs, a moment later in the same Open. What the replaced maps held
// is lost, and is rebuilt by its owners: the daemon re-adopts its sessions
// from its records (their policies and ports are written again, their
// addresses learned again at their next lookups); a session whose owner
// still runs the old binary loses its entries and fails closed. Maps that
// kept their layout keep their contents.
func replaceIncompatiblePins(spec *ebpf.CollectionSpec, pinDir string) ([]string, error) {
	var replaced []string
	for name, ms := range spec.Maps {
		if ms.Pinning != ebpf.PinByName {
			continue
		}
		path := filepath.Join(pinDir, name)
		m, err := ebpf.LoadPinnedMap(path, nil)
		if err != nil {
			continue // not pinned (created by the load), or unreadable (the load says why)
		}
		cerr := ms.Compatible(m)
		m.Close()
		if cerr == nil {
			continue
		}
		if err := os.Remove(path); err != nil {
			return replaced, fmt.Errorf("load datapath: replace the pinned map %s of another layout: %w", name, err)
		}
		replaced = append(replaced, name)
	}
	sort.Strings(replaced)
	return replaced, nil
}

// skip reports an optional attachment this datapath does without.
func (d *Datapath) skip(a attachment) bool {
	return a.isUnix() && d.unixErr != nil
}

// Open loads the programs, creates or re-opens the pinned maps under pinDir
// and attaches the programs to the cgroup at cgroupPath, or, when links are
// already pinned there, atomically updates them to this binary's programs.
// Concurrent Opens are serialised by a lock on pinDir.
func Open(pinDir, cgroupPath string) (*Datapath, error) {
	if err := ensureBPFFS(filepath.Dir(pinDir)); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(pinDir, 0o700); err != nil {
		return nil, fmt.Errorf("create pin directory: %w", err)
	}
	if err := os.Chmod(pinDir, 0o700); err != nil {
		return nil, fmt.Errorf("restrict pin directory: %w", err)
	}
	unlock, err := lockDir(pinDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	unpinLegacyKDNS(pinDir)

	spec, err := loadSpec()
	if err != nil {
		return nil, err
	}
	d := &Datapath{pinDir: pinDir, cgroupPath: cgroupPath, innerSpec: spec.Maps[sluiceMapSessionEvents].InnerMap.Copy(), kdnsInner: spec.Maps[sluiceMapKdnsSessionEvents].InnerMap.Copy()}
	d.unixErr = prepareUnix(spec)
	d.kdnsErr = kdnsDisabled()
	cgid, err := cgroupID(cgroupPath)
	if err != nil {
		return nil, err
	}
	opts := &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: pinDir}}
	if d.reuse(spec, opts, cgid) {
		return d, nil
	}
	err = spec.LoadAndAssign(&d.objs, opts)
	if errors.Is(err, ebpf.ErrMapIncompatible) {
		// An upgrade changed a pinned map's layout: replace those maps
		// and load again (see replaceIncompatiblePins).
		replaced, rerr := replaceIncompatiblePins(spec, pinDir)
		if rerr != nil {
			return nil, rerr
		}
		if len(replaced) > 0 {
			d.replaced = replaced
			err = spec.LoadAndAssign(&d.objs, opts)
		}
	}
	if err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("load datapath: %+v", verr)
		}
		if errors.Is(err, ebpf.ErrMapIncompatible) {
			return nil, fmt.Errorf("load datapath: pinned maps in %s come from another sluice version (run `sluice cleanup`): %w", pinDir, err)
		}
		return nil, fmt.Errorf("load datapath: %w", err)
	}
	if d.kdnsErr == nil {
		d.kdnsProgs, err = loadKDNS(&d.objs.sluiceMaps)
		if err != nil && kdnsLoadFailed(err) {
			// The kernel DNS path is optional: the datapath works
			// without it and sessions keep the resolver path.
			d.kdnsErr = fmt.Errorf("%w: %s", ErrKDNSUnsupported, firstLine(err.Error()))
		} else if err != nil {
			d.objs.Close()
			return nil, fmt.Errorf("load datapath: %w", err)
		}
	}
	for _, a := range attachments {
		if d.skip(a) {
			continue
		}
		l, err := d.attach(a, cgid)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.links = append(d.links, l)
		d.progs = append(d.progs, a.prog(&d.objs))
	}
	if err := d.attachSNI(); err != nil {
		d.Close()
		return nil, err
	}
	if err := d.updateAt(); err != nil {
		d.Close()
		return nil, err
	}
	if err := d.installKDNS(); err != nil {
		d.Close()
		return nil, err
	}
	if err := d.pinObjectHash(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// loadSpec reads the embedded object and sets its load-time constants for
// this kernel.
func loadSpec() (*ebpf.CollectionSpec, error) {
	spec, err := loadSluice()
	if err != nil {
		return nil, fmt.Errorf("load datapath spec: %w", err)
	}
	v, ok := spec.Variables["have_set_retval"]
	if !ok {
		return nil, errors.New("load datapath spec: the object has no have_set_retval")
	}
	// Any error (not supported, or the probe failed) means no: the
	// datapath then refuses MPTCP with EPERM, as on kernels before 5.18.
	have := uint8(0)
	if features.HaveProgramHelper(ebpf.CGroupSock, asm.FnSetRetval) == nil {
		have = 1
	}
	if err := v.Set(have); err != nil {
		return nil, fmt.Errorf("load datapath spec: set have_set_retval: %w", err)
	}
	return spec, nil
}

// objectHash identifies the embedded BPF objects, the datapath's and the
// kernel DNS path's: the pinned programs of both come from one build.
func objectHash() [32]byte {
	h := sha256.New()
	for _, b := range [][]byte{_SluiceBytes, _KdnsBytes} {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// metaPin is a one-entry array holding the hash of the objects whose
// programs the pinned links (and the pinned kernel DNS programs) run
// (bpffs holds only BPF objects).
const metaPin = "meta"

func (d *Datapath) objectPinned() bool {
	m, err := ebpf.LoadPinnedMap(filepath.Join(d.pinDir, metaPin), &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return false
	}
	defer m.Close()
	var got [32]byte
	if err := m.Lookup(uint32(0), &got); err != nil {
		return false
	}
	return got == objectHash()
}

func (d *Datapath) pinObjectHash() error {
	path := filepath.Join(d.pinDir, metaPin)
	m, err := ebpf.LoadPinnedMap(path, nil)
	if err != nil {
		m, err = ebpf.NewMap(&ebpf.MapSpec{Name: "sluice_meta", Type: ebpf.Array, KeySize: 4, ValueSize: 32, MaxEntries: 1})
		if err != nil {
			return fmt.Errorf("create meta map: %w", err)
		}
		if err := m.Pin(path); err != nil {
			m.Close()
			return fmt.Errorf("pin meta map: %w", err)
		}
	}
	defer m.Close()
	h := objectHash()
	if err := m.Update(uint32(0), h, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("record datapath version: %w", err)
	}
	return nil
}

// reuse is the fast path of Open: when the pinned datapath was attached
// from these very objects (their hash is pinned beside it) and every pinned
// link is attached to this cgroup, only the maps are opened; the kernel DNS
// programs are the pinned ones (pinnedKDNSPrograms), whose egress program
// the pinned kdns_tail array already holds. Loading (verifying) the
// programs is most of a cold start, and `sluice run` pays for it on every
// run otherwise.
func (d *Datapath) reuse(spec *ebpf.CollectionSpec, opts *ebpf.CollectionOptions, cgid uint64) bool {
	var links []link.Link
	var progs []*ebpf.Program
	fail := func() bool {
		for _, l := range links {
			l.Close()
		}
		for _, p := range progs {
			p.Close()
		}
		return false
	}
	if !d.objectPinned() {
		return false
	}
	for _, a := range attachments {
		if d.skip(a) {
			continue
		}
		l, err := link.LoadPinnedLink(filepath.Join(d.pinDir, a.name), nil)
		if err != nil {
			return fail()
		}
		links = append(links, l)
		info, err := l.Info()
		if err != nil || info.Cgroup() == nil || info.Cgroup().CgroupId != cgid {
			return fail()
		}
		p, err := ebpf.NewProgramFromID(info.Program)
		if err != nil {
			return fail()
		}
		progs = append(progs, p)
	}
	kprogs, err := d.pinnedKDNSPrograms()
	if err != nil {
		return fail()
	}
	if err := spec.LoadAndAssign(&d.objs.sluiceMaps, opts); err != nil {
		for _, p := range kprogs {
			p.Close()
		}
		return fail()
	}
	d.links, d.progs, d.reused, d.kdnsProgs = links, progs, true, kprogs
	return true
}

// attach re-opens and updates the pinned link of a, or attaches a new one
// and pins it. A pinned link whose cgroup is gone (or another one) is
// replaced: updating it would enforce nothing.
func (d *Datapath) attach(a attachment, cgid uint64) (link.Link, error) {
	pin := filepath.Join(d.pinDir, a.name)
	prog := a.prog(&d.objs)
	if l, err := link.LoadPinnedLink(pin, nil); err == nil {
		info, ierr := l.Info()
		if ierr == nil && info.Cgroup() != nil && info.Cgroup().CgroupId == cgid {
			if err := l.Update(prog); err != nil {
				l.Close()
				return nil, fmt.Errorf("update pinned link %s: %w", pin, err)
			}
			return l, nil
		}
		_ = l.Unpin()
		l.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("open pinned link %s: %w", pin, err)
	}
	l, err := link.AttachCgroup(link.CgroupOptions{Path: d.cgroupPath, Attach: a.attach, Program: prog})
	if err != nil {
		return nil, fmt.Errorf("attach %s to %s: %w", a.name, d.cgroupPath, err)
	}
	if err := l.Pin(pin); err != nil {
		l.Close()
		return nil, fmt.Errorf("pin %s: %w", pin, err)
	}
	return l, nil
}

// Close releases this process's handles; enforcement continues.
func (d *Datapath) Close() error {
	for _, l := range d.links {
		l.Close()
	}
	d.links = nil
	if d.reused {
		for _, p := range d.progs {
			p.Close()
		}
	}
	d.progs = nil
	for _, p := range d.kdnsProgs {
		p.Close()
	}
	d.kdnsProgs = nil
	return d.objs.Close()
}

// Verify checks that every sluice program is effective on the cgroup at
// path (a session's cgroup): the caller must refuse to spawn otherwise. A
// session on the kernel DNS path also needs that path's programs, attached
// to its own cgroup (AttachKDNS); other sessions run without them.
func (d *Datapath) Verify(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open cgroup %s: %w", path, err)
	}
	defer f.Close()
	for _, a := range attachments {
		if d.skip(a) {
			continue
		}
		// The program the pinned link runs now: another sluice may have
		// updated the link since this handle was opened.
		l, err := link.LoadPinnedLink(filepath.Join(d.pinDir, a.name), nil)
		if err != nil {
			return fmt.Errorf("verify %s: %w", a.name, err)
		}
		info, err := l.Info()
		l.Close()
		if err != nil {
			return fmt.Errorf("verify %s: link info: %w", a.name, err)
		}
		want := info.Program
		res, err := link.QueryPrograms(link.QueryOptions{Target: int(f.Fd()), Attach: a.attach, QueryFlags: unix.BPF_F_QUERY_EFFECTIVE})
		if err != nil {
			return fmt.Errorf("verify %s on %s: %w", a.name, path, err)
		}
		found := false
		for _, p := range res.Programs {
			found = found || p.ID == want
		}
		if !found {
			return fmt.Errorf("verify %s: program %d is not in force on %s", a.name, want, path)
		}
	}
	return d.verifyKDNS(f, path)
}

// Remove unpins every link and map under pinDir, which detaches the
// programs, and removes the directory. Sessions still running lose their
// confinement: only `sluice cleanup` calls it.
func Remove(pinDir string) error {
	entries, err := os.ReadDir(pinDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read pin directory: %w", err)
	}
	var errs []error
	for _, e := range entries {
		// Gone already is done: two cleanups at once (a CI job's reaper
		// and its finish step) must not fail each other.
		rm := os.Remove
		if e.Name() == atDir {
			rm = os.RemoveAll // the links at pods' cgroups (AttachAt)
		}
		if err := rm(filepath.Join(pinDir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unpin %s: %w", e.Name(), err))
		}
	}
	if err := os.Remove(pinDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove %s: %w", pinDir, err))
	}
	return errors.Join(errs...)
}

// Pinned reports whether a datapath is pinned under pinDir.
func Pinned(pinDir string) bool {
	_, err := os.Stat(filepath.Join(pinDir, attachments[0].name))
	return err == nil
}

func cgroupID(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("stat cgroup %s: %w", path, err)
	}
	return st.Ino, nil
}

// lockDir takes an exclusive flock on dir: loading and attaching are
// check-then-act sequences on shared pins.
func lockDir(dir string) (func(), error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s for locking: %w", dir, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { unix.Close(fd) }, nil
}

// ensureBPFFS mounts bpffs at dir when nothing is mounted there yet.
func ensureBPFFS(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && st.Type == unix.BPF_FS_MAGIC {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mount bpffs at %s: %w", dir, err)
	}
	return nil
}

// Probe loads the datapath without pinning anything, attaches every
// program to the cgroup at cgroupPath with bpf_link and detaches again: the
// strongest answer to "can this machine enforce?" short of doing it.
func Probe(cgroupPath string) error {
	spec, err := loadSpec()
	if err != nil {
		return err
	}
	for _, m := range spec.Maps {
		m.Pinning = ebpf.PinNone
	}
	unixErr := prepareUnix(spec)
	kdnsErr := kdnsDisabled()
	var objs sluiceObjects
	err = spec.LoadAndAssign(&objs, nil)
	if err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return fmt.Errorf("load datapath: %+v", verr)
		}
		return fmt.Errorf("load datapath: %w", err)
	}
	defer objs.Close()
	var kprogs []*ebpf.Program
	if kdnsErr == nil {
		kprogs, err = loadKDNS(&objs.sluiceMaps)
		if err != nil && !kdnsLoadFailed(err) {
			return fmt.Errorf("load datapath: %w", err)
		}
		kdnsErr = err // refused by this kernel: the datapath works without it
	}
	defer func() {
		for _, p := range kprogs {
			p.Close()
		}
	}()
	for _, a := range attachments {
		if a.isUnix() && unixErr != nil {
			continue
		}
		l, err := link.AttachCgroup(link.CgroupOptions{Path: cgroupPath, Attach: a.attach, Program: a.prog(&objs)})
		if err != nil {
			return fmt.Errorf("attach %s with bpf_link: %w", a.name, err)
		}
		l.Close()
	}
	if kdnsErr != nil {
		return nil
	}
	for i, a := range kdnsAttachments {
		l, err := link.AttachCgroup(link.CgroupOptions{Path: cgroupPath, Attach: a.attach, Program: kprogs[i]})
		if err != nil {
			return fmt.Errorf("attach %s with bpf_link: %w", a.name, err)
		}
		l.Close()
	}
	return nil
}
