package node

import (
	"time"

	"github.com/paygate/gateway/actors"
	"github.com/paygate/gateway/transport/server"
)

// forms configures the hosted payment form and 3-D Secure pages: the public
// address put into form_url (--form-url, default http://<http-addr>), the
// lifetime of an unpaid form (--form-ttl) and the clock.
func (n *Node) forms() server.FormConfig {
	return server.FormConfig{URL: n.cfg.FormURL, TTL: n.formTTL(), Now: time.Now}
}

func (n *Node) formTTL() time.Duration {
	if n.cfg.FormTTL > 0 {
		return n.cfg.FormTTL
	}
	return server.DefaultFormTTL
}

// threeDS configures 3-D Secure challenges: redirect_url points to the
// node's own issuer page under --form-url; an unanswered challenge ends with
// the form's lifetime (counted from the challenge).
func (n *Node) threeDS() actors.ThreeDSConfig {
	return actors.ThreeDSConfig{URLBase: n.cfg.FormURL, TTL: n.formTTL()}
}

// expiryPoll is how often the leader looks for ended forms and challenges:
// a tenth of their lifetime, between 5 ms and 1 s.
func (n *Node) expiryPoll() time.Duration {
	return min(max(n.formTTL()/10, 5*time.Millisecond), time.Second)
}
