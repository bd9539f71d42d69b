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
	if env, ok := ctx.Message().(*envelope); ok && env.msg != "silent" {
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

// blockingActor holds its mailbox on "block" until release is closed.
type blockingActor struct{ blocked, release chan struct{} }

func (b blockingActor) Receive(ctx actor.Context) {
	if env, ok := ctx.Message().(*envelope); ok {
		if env.msg == "block" {
			close(b.blocked)
			<-b.release
		}
		env.respond(env.msg)
	}
}

// Send never runs the actor on the caller's goroutine (the scheduler's loop
// must not wait for an order), while a request to an actor that another
// goroutine is running waits for its turn and is answered.
func TestRegistrySendDoesNotRunTheActor(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	blocked, release := make(chan struct{}), make(chan struct{})
	reg := NewRegistry(system, func(Key) actor.Actor { return blockingActor{blocked, release} })
	defer reg.StopAll(true)

	sent := make(chan struct{})
	go func() {
		reg.Send(Key{"m1", "o1"}, "block")
		close(sent)
	}()
	select {
	case <-sent:
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("Send ran the blocking actor on the caller's goroutine")
	}
	<-blocked
	answered := make(chan any, 1)
	go func() {
		v, _ := reg.Request(Key{"m1", "o1"}, "after", 5*time.Second)
		answered <- v
	}()
	select {
	case v := <-answered:
		t.Fatalf("answered %v while the actor was still busy with the message before", v)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if v := <-answered; v != "after" {
		t.Fatalf("answer %v", v)
	}
}
