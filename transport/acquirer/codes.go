package acquirer

import (
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"strings"
)

// ISO 8583 response codes (field 39) the sandbox host answers and the link
// reads.
const (
	RespApproved             = "00"
	RespDoNotHonour          = "05"
	RespInvalidTransaction   = "12" // e.g. a capture of an authorisation the host does not know
	RespFormatError          = "30"
	RespInsufficientFunds    = "51"
	RespExpiredCard          = "54"
	RespSuspectedFraud       = "59"
	RespIssuerUnavailable    = "91"
	RespSystemMalfunction    = "96"
	RespCVVFailed            = "N7"
	RespAuthenticationNeeded = "1A" // the issuer requires 3-D Secure (not in contract 12's list: ours)
)

// Response is one row of the response code table.
type Response struct {
	ISO     string // field 39
	Decline string // contract section 3 decline code; "" for approved
	Message string
	Risk    string // the order's risk.decision
}

// Responses is the one table from ISO 8583 response codes to the contract's
// decline codes (contract section 12). The host answers with these codes and
// the link reads them back through this table; a code not in it is a
// decline 3.08, do not honour.
var Responses = []Response{
	{RespApproved, "", "", RiskAccept},
	{RespDoNotHonour, CodeDoNotHonour, MsgDoNotHonour, RiskAccept},
	{RespInsufficientFunds, CodeInsufficientFunds, MsgInsufficientFunds, RiskAccept},
	{RespExpiredCard, CodeCardExpired, MsgCardExpired, RiskAccept},
	{RespCVVFailed, CodeInvalidCVV, MsgInvalidCVV, RiskAccept},
	{RespSuspectedFraud, CodeBlockedByRisk, MsgBlockedByRisk, RiskDecline},
	{RespIssuerUnavailable, CodeAcquirerUnreachable, MsgAcquirerUnreachable, RiskAccept},
	{RespSystemMalfunction, CodeAcquirerUnreachable, MsgAcquirerUnreachable, RiskAccept},
	{RespAuthenticationNeeded, Code3DSFailed, Msg3DSFailed, RiskAccept},
}

// ResponseFor returns the table's row for an ISO 8583 response code; an
// unknown code reads as do not honour.
func ResponseFor(iso string) Response {
	for _, r := range Responses {
		if r.ISO == iso {
			return r
		}
	}
	return Response{ISO: iso, Decline: CodeDoNotHonour, Message: MsgDoNotHonour, Risk: RiskAccept}
}

// ErrNoReference is returned for a request without a Reference: a caller bug,
// not worth retrying.
var ErrNoReference = errors.New("acquirer: authorisation request without a reference")

// ErrInvalidRequest is a request that cannot be put into a message (an
// amount of more than 12 digits, a currency without an ISO 4217 number): a
// caller bug, not worth retrying.
var ErrInvalidRequest = errors.New("acquirer: request cannot be expressed in ISO 8583")

var rrnEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// RRN is the retrieval reference number (field 37, 12 letters and digits)
// of the gateway transaction reference: a digest, so every attempt of one
// transaction, on any node and after any restart, carries the same RRN, and
// the settlement report can be matched to the gateway's transactions.
func RRN(reference string) string {
	sum := sha256.Sum256([]byte(reference))
	return rrnEncoding.EncodeToString(sum[:8])[:12]
}

// CardAcceptorID is field 42 (15 printable ASCII characters, space-padded)
// for an order: its processing_mid when that fits, else an id derived from
// the merchant ("GW" and 13 characters of a digest), so one merchant's
// payments without a usable processing_mid share one MID at the acquirer.
// (Registered MIDs, /admin/v1/mids, are still to come: docs/acquirer.md.)
func CardAcceptorID(processingMID, merchant string) string {
	if len(processingMID) > 0 && len(processingMID) <= 15 && printable(processingMID) {
		return processingMID + strings.Repeat(" ", 15-len(processingMID))
	}
	sum := sha256.Sum256([]byte(merchant))
	return "GW" + rrnEncoding.EncodeToString(sum[:9])[:13]
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
