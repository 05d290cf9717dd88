package auth

import (
	"strconv"
	"testing"
	"time"
)

func TestLimiterCountsPerKeyAndForgets(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := NewLimiter(3, time.Minute)
	for i := 0; i < 3; i++ {
		if ok, _ := l.Allow("a", now); !ok {
			t.Fatalf("refused after %d failures", i)
		}
		l.Fail("a", now.Add(time.Duration(i)*time.Second))
	}
	ok, wait := l.Allow("a", now.Add(10*time.Second))
	if ok || wait != 50*time.Second {
		t.Fatalf("after 3 failures: allowed %v, wait %s; want refused until the first failure leaves the window (50s)", ok, wait)
	}
	if ok, _ := l.Allow("b", now); !ok {
		t.Fatal("another key is refused")
	}
	if ok, _ := l.Allow("a", now.Add(time.Minute)); !ok {
		t.Fatal("still refused once the first failure left the window")
	}
	l.Reset("a")
	if ok, _ := l.Allow("a", now.Add(10*time.Second)); !ok {
		t.Fatal("refused after Reset")
	}
}

func TestLimiterTakeCountsAttempts(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := NewLimiter(2, time.Hour)
	for i := 0; i < 2; i++ {
		if ok, _ := l.Take("addr", now); !ok {
			t.Fatalf("attempt %d refused", i)
		}
	}
	if ok, wait := l.Take("addr", now.Add(time.Minute)); ok || wait != 59*time.Minute {
		t.Fatalf("third attempt: %v, wait %s", ok, wait)
	}
	if ok, _ := l.Take("addr", now.Add(time.Hour)); !ok {
		t.Fatal("refused after the window")
	}
}

// Keys never seen again are dropped once there are many, so one address trying many
// accounts cannot grow the limiter without bound.
func TestLimiterSweepsOldKeys(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := NewLimiter(10, time.Minute)
	for i := 0; i < sweepAt; i++ {
		l.Fail(strconv.Itoa(i), now)
	}
	l.Fail("late", now.Add(2*time.Minute))
	if n := len(l.fails); n != 1 {
		t.Fatalf("%d keys kept, want only the live one", n)
	}
}
