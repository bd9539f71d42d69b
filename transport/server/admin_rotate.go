package server

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/persistence/vault"
	"github.com/paygate/gateway/transport/apierr"
)

// OverlapSecondsMax bounds a rotation's overlap: 30 days, longer than any
// deployment of a merchant's new key should take.
const OverlapSecondsMax = 30 * 24 * 3600

type rotateKeysRequest struct {
	Pair           string `json:"pair"`
	OverlapSeconds int64  `json:"overlap_seconds"`
}

// RotatedKeys answers a rotation: the new pair, and for the API pair the
// replaced public key and when it stops signing requests.
type RotatedKeys struct {
	MerchantID         string `json:"merchant_id"`
	Pair               string `json:"pair"`
	PublicKey          string `json:"public_key"`
	SecretKey          string `json:"secret_key"`
	PreviousPublicKey  string `json:"previous_public_key"`
	PreviousValidUntil string `json:"previous_valid_until,omitempty"`
}

// serveMerchantAdmin: POST /admin/v1/merchants/{merchant_id}/rotate-keys
// {"pair":"api"|"webhook","overlap_seconds":N} (contract section 14). It
// runs on the leader (admin writes are forwarded there).
func (s *Server) serveMerchantAdmin(ctx *fasthttp.RequestCtx, rest string) {
	id, action, _ := strings.Cut(rest, "/")
	if action != "rotate-keys" || id == "" {
		writeError(ctx, apierr.New(apierr.UnknownPath, "path", "no such admin route"))
		return
	}
	if !ctx.IsPost() {
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use POST to rotate keys"))
		return
	}
	var req rotateKeysRequest
	if err := json.Unmarshal(ctx.PostBody(), &req, json.RejectUnknownMembers(true)); err != nil {
		writeError(ctx, apierr.New(apierr.BadBody, "body", `body must be a JSON object {"pair":"api"|"webhook","overlap_seconds":N}`))
		return
	}
	var verr *apierr.Error
	invalid := func(attr, msg string) {
		if verr == nil {
			verr = &apierr.Error{Code: apierr.Invalid}
		}
		verr.Add(attr, msg)
	}
	switch {
	case req.Pair != "api" && req.Pair != "webhook":
		invalid("pair", `pair should be "api" or "webhook"`)
	case req.OverlapSeconds < 0 || req.OverlapSeconds > OverlapSecondsMax:
		invalid("overlap_seconds", "overlap_seconds should be from 0 to 2592000 (30 days)")
	case req.Pair == "webhook" && req.OverlapSeconds != 0:
		// Notifications are signed by one pair: the newest.
		invalid("overlap_seconds", "a webhook pair has no overlap: every notification sent after the rotation is signed with the new pair; omit overlap_seconds or send 0")
	}
	if verr != nil {
		writeError(ctx, verr)
		return
	}
	out, err := s.rotateKeys(ctx, id, req)
	switch {
	case errors.Is(err, persistence.ErrUnknownMerchant):
		writeError(ctx, apierr.New(apierr.UnknownPath, "merchant_id", "no merchant with that merchant_id"))
	case errors.Is(err, persistence.ErrRotationConflict):
		writeError(ctx, apierr.New(apierr.Conflict, "pair", "another rotation of this pair committed at the same time; ask again"))
	case err != nil:
		writeError(ctx, s.errorFor("rotate keys", err))
	default:
		writeJSON(ctx, 200, out)
	}
}

// rotateKeys makes the new pair, seals its secret and proposes the
// rotation against the pair the store holds now.
func (s *Server) rotateKeys(ctx context.Context, id string, req rotateKeysRequest) (*RotatedKeys, error) {
	// Every change committed before this request is in the store read below.
	if err := s.cfg.Cluster.ReadBarrier(ctx); err != nil {
		return nil, err
	}
	cur, err := s.cfg.Store.Merchant(id)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, persistence.ErrUnknownMerchant
	}
	out := &RotatedKeys{MerchantID: id, Pair: req.Pair}
	cmd := &command.MerchantKeys{MerchantID: id, Pair: req.Pair}
	purpose := "merchant-api"
	if req.Pair == "api" {
		out.PublicKey, out.SecretKey = randomHex("pk_", 12), randomHex("sk_", 24)
		cmd.Replaces = cur.APIPublicKey
		until := s.cfg.Now().Add(time.Duration(req.OverlapSeconds) * time.Second).UTC()
		cmd.PreviousUntil = until.UnixNano()
		out.PreviousValidUntil = until.Format(time.RFC3339Nano)
	} else {
		out.PublicKey, out.SecretKey = randomHex("whpk_", 12), randomHex("whsk_", 24)
		cmd.Replaces = cur.WebhookPublicKey
		purpose = "merchant-webhook"
	}
	out.PreviousPublicKey = cmd.Replaces
	cmd.PublicKey = out.PublicKey
	if cmd.SecretSealed, err = s.cfg.Vault.Seal([]byte(out.SecretKey), vault.AAD(purpose, id)); err != nil {
		return nil, err
	}
	res, err := s.cfg.Cluster.Propose(ctx, &command.Cmd{MerchantKeys: cmd})
	if err != nil {
		return nil, err
	}
	if res.Err != nil {
		return nil, res.Err
	}
	return out, nil
}
