package follower

import (
	"math"
	"time"
)

// Bounded exponential backoff with deterministic jitter.

// BackoffPolicy bounds the exponential backoff between retries.
type BackoffPolicy struct {
	// Base is the delay before the first retry (replica.fetch.backoff.ms in
	// Kafka, 1s by default there).
	Base time.Duration
	// Max caps every delay.
	Max time.Duration
}

// DefaultBackoff is used for a zero BackoffPolicy.
var DefaultBackoff = BackoffPolicy{Base: 100 * time.Millisecond, Max: 10 * time.Second}

// Delay returns the wait before retry number attempt (1 for the first
// retry). It doubles per attempt from Base up to Max, and jitter in [0, 1)
// spreads it over the upper half ("equal jitter"), so partitions that failed
// together do not retry in lockstep while every wait stays within
// [d/2, d], d = min(Base·2^(attempt-1), Max). Pure: the caller supplies the
// jitter.
func (b BackoffPolicy) Delay(attempt int, jitter float64) time.Duration {
	d := b.Step(attempt)
	if !(jitter >= 0) { // also NaN
		jitter = 0
	}
	if jitter >= 1 {
		jitter = math.Nextafter(1, 0)
	}
	half := d / 2
	return d - half + time.Duration(jitter*float64(half))
}

// Step is the wait before retry number attempt without jitter: the top of
// Delay's range, d = min(Base·2^(attempt-1), Max), the same for every
// partition, for the retries that go out together (Together).
func (b BackoffPolicy) Step(attempt int) time.Duration {
	if b.Base <= 0 {
		b.Base = DefaultBackoff.Base
	}
	if b.Max <= 0 {
		b.Max = max(DefaultBackoff.Max, b.Base)
	}
	if attempt < 1 {
		attempt = 1
	}
	d := b.Max
	if shift := attempt - 1; shift < 62 && b.Base <= math.MaxInt64>>shift {
		d = min(b.Base<<shift, b.Max)
	}
	return d
}

// togetherMax caps the wait of the retries that go out together
// (Together): Kafka's replica fetcher waits replica.fetch.backoff.ms (1 s
// by default) before every retry of a failed partition, without growth. A
// broker taking over thousands of partitions makes itself leader of them
// over seconds, so a wait that kept doubling would overshoot the moment it
// is done by as much as it had waited.
const togetherMax = time.Second

// TogetherDelay is the wait before retry number attempt after an error
// that every partition of a reply retries together (Together): Step, the
// same for every partition, capped at togetherMax (or the first step, if
// longer).
func (b BackoffPolicy) TogetherDelay(attempt int) time.Duration {
	return min(b.Step(attempt), max(togetherMax, b.Step(1)))
}

// jitterFor derives a jitter value in [0, 1) from a seed and an attempt
// count with splitmix64, so that the state machine stays deterministic.
func jitterFor(seed uint64, attempt int) float64 {
	z := seed + uint64(attempt)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}
