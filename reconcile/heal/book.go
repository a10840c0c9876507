package heal

import "time"

// Self-heal timing. A write that undoes another manager's change less than
// FightWindow after the previous one for the same object is a fight: the
// object is then left alone for a back-off that doubles with every further
// fight, up to MaxBackoff, and resets after a quiet MaxBackoff.
const (
	FightWindow    = 10 * time.Second
	InitialBackoff = 2 * time.Second
	MaxBackoff     = 5 * time.Minute
)

// Heal is one drift that a watch event showed and a write restored.
type Heal struct {
	Kind, Name string
	// Latency is from the event that showed the change to the end of the
	// write that restored it.
	Latency time.Duration
	// Fight is set when the object was restored less than FightWindow
	// after the previous heal: another manager keeps changing it, and
	// recond now backs off (Backoff).
	Fight   bool
	Backoff time.Duration
}

// Write is an object a tick wrote successfully (created or updated).
type Write struct{ Kind, Name string }

// Book remembers, per object ("Kind/name"), when a watch event showed that
// someone else changed it (so that the write restoring it can report the
// heal latency) and how it fares in a fight. The zero Book is ready.
type Book struct {
	seen    map[string]time.Time // first unhealed change seen
	objects map[string]*fight
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

type fight struct {
	lastHeal time.Time
	backoff  time.Duration
	until    time.Time // no self-heal write before this
}

func (b *Book) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// Changed records that another manager changed (or deleted) the object key
// at time at; the first change since the last heal counts.
func (b *Book) Changed(key string, at time.Time) {
	if b.seen == nil {
		b.seen = map[string]time.Time{}
	}
	if _, ok := b.seen[key]; !ok {
		b.seen[key] = at
	}
}

// Pending reports how many changes wait for the write that restores them.
func (b *Book) Pending() int { return len(b.seen) }

// BackingOff reports whether self-heal writes to key are held back, and
// until when.
func (b *Book) BackingOff(key string) (time.Time, bool) {
	s := b.objects[key]
	if s == nil || !b.now().Before(s.until) {
		return time.Time{}, false
	}
	return s.until, true
}

// Healed settles a tick that started at tickStart and whose writes ended
// at writesEnd: every write of an object a watch showed changed is a heal
// (latency since the change); every other remembered change older than the
// tick was not drift (a status update, an edit of a field Git does not set)
// and is forgotten.
func (b *Book) Healed(tickStart time.Time, writes []Write, writesEnd time.Time) []Heal {
	var heals []Heal
	for _, w := range writes {
		key := w.Kind + "/" + w.Name
		at, ok := b.seen[key]
		if !ok {
			continue
		}
		delete(b.seen, key)
		heal := Heal{Kind: w.Kind, Name: w.Name, Latency: writesEnd.Sub(at)}
		if b.objects == nil {
			b.objects = map[string]*fight{}
		}
		s := b.objects[key]
		if s == nil {
			s = &fight{}
			b.objects[key] = s
		}
		now := b.now()
		// Time is measured from the last heal or, when later, from the end
		// of the back-off: a revert right after a back-off is still the
		// same fight, and the time spent backing off is not quiet.
		ref := s.lastHeal
		if s.until.After(ref) {
			ref = s.until
		}
		switch {
		case !s.lastHeal.IsZero() && now.Sub(ref) < FightWindow:
			if s.backoff == 0 {
				s.backoff = InitialBackoff
			} else {
				s.backoff = min(2*s.backoff, MaxBackoff)
			}
			s.until = now.Add(s.backoff)
			heal.Fight, heal.Backoff = true, s.backoff
		case now.Sub(ref) > MaxBackoff:
			s.backoff = 0 // a quiet while: forgive
		}
		s.lastHeal = now
		heals = append(heals, heal)
	}
	for key, at := range b.seen {
		// A change to an object backing off is kept: the write when the
		// back-off ends is its heal.
		if s := b.objects[key]; at.Before(tickStart) && (s == nil || !b.now().Before(s.until)) {
			delete(b.seen, key)
		}
	}
	return heals
}
