package actors

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// echoActor answers a request with its message unless told to stay silent.
type echoActor struct{}

func (echoActor) Receive(ctx actor.Context) {
	if env, ok := ctx.Message().(envelope); ok && env.msg != "silent" {
		env.respond(env.msg)
	}
}

// A request gets its own answer, and a request nobody answers ends with
// ErrTimeout after its timeout, not later.
func TestRegistryRequestAnswersAndTimesOut(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	reg := NewRegistry(system, func(Key) actor.Actor { return echoActor{} })
	defer reg.StopAll(true)

	if v, err := reg.Request(Key{"m1", "o1"}, "hello", 5*time.Second); err != nil || v != "hello" {
		t.Fatalf("answer: %v %v", v, err)
	}
	start := time.Now()
	_, err := reg.Request(Key{"m1", "o2"}, "silent", 100*time.Millisecond)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("unanswered request: %v, want ErrTimeout", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("unanswered request returned after %v", waited)
	}
	// A plain send has no one to answer: the actor must not block on it.
	reg.Send(Key{"m1", "o1"}, "no reply expected")
	if v, err := reg.Request(Key{"m1", "o1"}, "after", 5*time.Second); err != nil || v != "after" {
		t.Fatalf("answer after a send: %v %v", v, err)
	}
}
