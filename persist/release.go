package persist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The release object ("release") names the seqkeeper release that wrote
// the store's formats, so that a build too old to read an object can say
// which release to run instead of only which format it lacks:
//
//	seqkeeper-release v1
//	release "v0.4.0"
//	seqkeeper-bucket 2
//	seqkeeper-epoch 3
//	seqkeeper-log 2
//	seqkeeper-store 2
//
// It is a separate object, not a line of the meta or epoch object, because
// the readers of those formats refuse lines they do not know: a store
// written with it stays readable by every build that reads its meta and
// epoch objects. Builds before it ignore it. A build writes it (with
// StoreOptions.Release) before it writes a meta or epoch object in its own
// format over an older one or creates a store, and never over one that
// records a newer format of any object: it names the release that last
// moved the formats on. It is advisory: only error messages read it, so a
// missing or unreadable one costs the release's name ("a later release"),
// nothing else. Every later build reads it whatever its version: later
// versions keep the "release" line and a "<format> <version>" line per
// object format, and may add lines that earlier builds skip.
const (
	releaseKey     = "release"
	releaseMagic   = "seqkeeper-release"
	releaseVersion = 1
)

// writtenFormats are the object formats this build writes, by magic.
var writtenFormats = map[string]int{
	bucketMagic: bucketVersion,
	epochMagic:  epochVersion,
	logMagic:    logVersion,
	metaMagic:   metaVersion,
}

// releaseState is the content of the release object.
type releaseState struct {
	release string
	formats map[string]int // magic -> version
}

func encodeRelease(r releaseState) []byte {
	kv := []string{"release", strconv.Quote(r.release)}
	for _, m := range slices.Sorted(maps.Keys(r.formats)) {
		kv = append(kv, m, strconv.Itoa(r.formats[m]))
	}
	return encodeFields(releaseMagic, releaseVersion, kv...)
}

// decodeRelease reads a release object of any version (see releaseKey):
// the release and the formats it names; other lines are skipped.
func decodeRelease(data []byte) (releaseState, error) {
	line, rest, ok := bytes.Cut(data, []byte{'\n'})
	m, v, _ := strings.Cut(string(line), " v")
	if ver, err := strconv.Atoi(v); !ok || m != releaseMagic || err != nil || ver < 1 {
		return releaseState{}, corruptf("not a %s object (first line %.40q)", releaseMagic, line)
	}
	r := releaseState{formats: map[string]int{}}
	for len(rest) > 0 {
		if line, rest, ok = bytes.Cut(rest, []byte{'\n'}); !ok {
			return releaseState{}, corruptf("unterminated line %.40q", line)
		}
		k, v, _ := strings.Cut(string(line), " ")
		switch {
		case k == "release":
			if r.release, ok = unquote(v); !ok || r.release == "" {
				return releaseState{}, corruptf("bad release %.40q", v)
			}
		case strings.HasPrefix(k, "seqkeeper-"):
			n, err := parseCount(v)
			if err != nil || n < 1 || n > 1<<20 {
				return releaseState{}, corruptf("bad version of %s %.20q", k, v)
			}
			r.formats[k] = int(n)
		}
	}
	if r.release == "" {
		return releaseState{}, corruptf("no release line")
	}
	return r, nil
}

// supersedes reports whether this build's formats move the formats the
// record r names on: none of r's is newer than this build's, and one of
// this build's is newer than r's or missing from it.
func supersedes(r releaseState) bool {
	newer := false
	for m, v := range r.formats {
		if w, ok := writtenFormats[m]; ok && v > w {
			return false
		}
	}
	for m, w := range writtenFormats {
		if v, ok := r.formats[m]; !ok || w > v {
			newer = true
		}
	}
	return newer
}

// NewerFormatError is the ErrNewerFormat of one object (errors.Is it with
// ErrNewerFormat): its format is newer than this build reads. A Store
// fills in the release that wrote the format from the store's release
// object, so that the message says what to run.
type NewerFormatError struct {
	// Format is the object's format ("seqkeeper-store", the meta
	// object's), Version its version and Reads the newest version of it
	// this build reads.
	Format         string
	Version, Reads int
	// WrittenBy is the release that wrote the format, "" when the store
	// does not say (written before releases were recorded).
	WrittenBy string
	// This is this build's release (StoreOptions.Release), "" when not
	// given.
	This string
	// explained: the Store looked for the release (WrittenBy, This).
	explained bool
}

func (e *NewerFormatError) Unwrap() error { return ErrNewerFormat }

func (e *NewerFormatError) Error() string {
	if !e.explained {
		return fmt.Sprintf("%v (object format %s v%d, this build reads up to v%d)", ErrNewerFormat, e.Format, e.Version, e.Reads)
	}
	this := "this build"
	if e.This != "" {
		this = "this is " + e.This
	}
	by, run := "a later release", "run that release or a later one"
	if e.WrittenBy != "" {
		by, run = "seqkeeper "+e.WrittenBy, "run "+e.WrittenBy+" or later"
	}
	return fmt.Sprintf("%v: store format %s v%d was written by %s; %s, which reads up to v%d: %s",
		ErrNewerFormat, e.Format, e.Version, by, this, e.Reads, run)
}

// explain fills in, when err is a NewerFormatError, the release that
// wrote the format (read from the release object) and this build's.
func (s *Store) explain(ctx context.Context, err error) error {
	var nf *NewerFormatError
	if !errors.As(err, &nf) || nf.explained {
		return err
	}
	nf.explained, nf.This = true, s.opts.Release
	data, _, gerr := s.b.Get(ctx, releaseKey)
	if gerr != nil {
		if !errors.Is(gerr, ErrNotFound) {
			s.log.Warn().Err(gerr).Msg("store: the release object, which names the release of a newer format, is unreadable")
		}
		return err
	}
	r, derr := decodeRelease(data)
	switch {
	case derr != nil:
		s.log.Warn().Err(derr).Msg("store: the release object, which names the release of a newer format, is unreadable")
	case r.formats[nf.Format] == nf.Version:
		nf.WrittenBy = r.release
	}
	return err
}

// recordRelease writes the release object naming StoreOptions.Release and
// this build's formats, unless it already names formats as new as these
// (or a newer one of any object): call it before writing the meta or
// epoch object in this build's format over an older one, or creating a
// store. Without StoreOptions.Release it writes nothing. An unreadable
// release object is left as it is (the store never overwrites what it
// cannot read), with a warning.
func (s *Store) recordRelease(ctx context.Context) error {
	if s.opts.Release == "" || s.releaseRecorded.Load() {
		return nil
	}
	for attempt := 0; ; attempt++ {
		data, etag, err := s.b.Get(ctx, releaseKey)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return fmt.Errorf("read the release object: %w", err)
		default:
			r, derr := decodeRelease(data)
			if derr != nil {
				s.log.Warn().Err(derr).Msg("store: the release object is unreadable; left as it is (it only names the release of the store's formats)")
				s.releaseRecorded.Store(true)
				return nil
			}
			if !supersedes(r) {
				s.releaseRecorded.Store(true)
				return nil
			}
		}
		_, err = s.b.Put(ctx, releaseKey, encodeRelease(releaseState{release: s.opts.Release, formats: writtenFormats}), etag)
		if err == nil {
			s.log.Info().Str("release", s.opts.Release).Msg("store: the release object names this release as the writer of the store's formats")
			s.releaseRecorded.Store(true)
			return nil
		}
		if !errors.Is(err, ErrConflict) {
			return fmt.Errorf("write the release object: %w", err)
		}
		if err := retry.Wait(ctx, attempt); err != nil {
			return fmt.Errorf("write the release object: %w", err)
		}
	}
}

// recordReleaseOver is recordRelease before this build writes the epoch
// object over cur, the one it read: when that is of an older format (or
// missing, version 0).
func (s *Store) recordReleaseOver(ctx context.Context, cur epochState) error {
	if cur.version >= epochVersion {
		return nil
	}
	return s.recordRelease(ctx)
}
