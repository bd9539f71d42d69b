package api

import (
	"encoding/base64"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/order/card"
	"github.com/paygate/gateway/order/currency"
	"github.com/paygate/gateway/transport/apierr"
)

// Bounds the interface leaves open (see README.md).
const (
	// MaxAmount is the largest accepted amount in minor units (10^15: ten
	// trillion units of a two-decimal currency). Sums of settled and
	// refunded amounts stay far away from int64 overflow.
	MaxAmount int64 = 1_000_000_000_000_000
	// MaxSettleDelayHours is the largest settle.delay_hours: one year.
	MaxSettleDelayHours int64 = 8760
	// MaxOrderMetadata is the largest number of order_metadata properties.
	MaxOrderMetadata = 10
	// DefaultMPIVersion is three_ds.mpi_data.version when absent.
	DefaultMPIVersion = "1.0.0"
	// DefaultWalletBProtocolVersion is walletb-pay's protocolVersion when absent.
	DefaultWalletBProtocolVersion = "ECv0"
)

// Payment source types.
const (
	SourceCard    = "card"
	SourceToken   = "token"
	SourceWalletA = "walleta-pay"
	SourceWalletB = "walletb-pay"
)

// ValidateCharge checks a decoded POST /charge body (interface 4.3, 4.9, 2.6,
// 2.7, 8). now is the clock used for the card-expiry check (compared in UTC).
// It returns nil, or one error that lists every violation.
func ValidateCharge(r *ChargeRequest, now time.Time) *apierr.Error {
	if r == nil {
		return errNotObject()
	}
	var v violations
	v.charge(r, now)
	v.settle(r.Settle)
	return v.result()
}

// ValidateAuth checks a decoded POST /auth body (contract section 15): a
// charge that is never settled automatically, so `settle` is not part of
// it. One that gives settle.delay_hours is refused rather than ignored: the
// merchant asked for an automatic settle that /auth would not make.
func ValidateAuth(r *ChargeRequest, now time.Time) *apierr.Error {
	if r == nil {
		return errNotObject()
	}
	var v violations
	v.charge(r, now)
	if r.Settle != nil {
		v.add(famGeneral, "settle", "settle is not part of auth: an auth is settled only by a settle request "+
			"(send a charge with settle.delay_hours for an automatic settle)")
	}
	return v.result()
}

// ValidateRecurring checks a decoded POST /recurring body (contract section
// 15): the token charge it stands for, by ValidateCharge's rules, with the
// request's own names in the answer (recurring_token). The card's CVV is
// not part of it: a payment with the CVV is a resign.
func ValidateRecurring(r *RecurringRequest, now time.Time) *apierr.Error {
	if r == nil {
		return errNotObject()
	}
	err := ValidateCharge(r.Charge(false), now)
	if r.CardCVV != nil {
		err = withViolation(err, "card_cvv", "card_cvv is not part of recurring: send a payment with the card's CVV to resign")
	}
	return RecurringNames(err)
}

// ValidateResign checks a decoded POST /resign body (contract section 15):
// a recurring payment with the card's CVV, which is required.
func ValidateResign(r *RecurringRequest, now time.Time) *apierr.Error {
	if r == nil {
		return errNotObject()
	}
	err := ValidateCharge(r.Charge(true), now)
	if r.CardCVV == nil {
		err = withViolation(err, "card_cvv", "card_cvv is required")
	}
	return RecurringNames(err)
}

// recurringNames are the names /recurring and /resign use for what a token
// charge calls payment_source.payment_token and payment_source.card_cvv,
// longest first: messages are renamed in this order.
var recurringNames = [...][2]string{
	{"payment_source.payment_token", "recurring_token"},
	{"payment_source.card_cvv", "card_cvv"},
	{"payment_token", "recurring_token"},
}

// RecurringNames renames, in an answer about the token charge a /recurring
// or /resign request stands for, the attributes and the words of its
// messages to the names that request uses. nil stays nil.
func RecurringNames(e *apierr.Error) *apierr.Error {
	if e == nil {
		return nil
	}
	out := &apierr.Error{Code: e.Code, Messages: make(map[string][]string, len(e.Messages))}
	for attr, msgs := range e.Messages {
		for _, n := range recurringNames {
			if attr == n[0] {
				attr = n[1]
				break
			}
		}
		for _, m := range msgs {
			for _, n := range recurringNames {
				m = strings.ReplaceAll(m, n[0], n[1])
			}
			out.Messages[attr] = append(out.Messages[attr], m)
		}
	}
	return out
}

// withViolation adds a field violation to err (nil: none yet). Whatever
// err's code was, the answer is then 2.01: a missing or refused field is
// never a card or currency family's code.
func withViolation(err *apierr.Error, attr, msg string) *apierr.Error {
	if err == nil {
		return apierr.New(apierr.Invalid, attr, msg)
	}
	err.Code = apierr.Invalid
	err.Add(attr, msg)
	return err
}

// charge checks what a charge and an auth share: everything but settle.
func (v *violations) charge(r *ChargeRequest, now time.Time) {
	v.orderFields(&r.OrderFields, true)
	if r.ThreeDS != nil && r.ThreeDS.MPIData != nil {
		v.mpiData(r.ThreeDS.MPIData, r.PaymentSource)
	}
	if r.Recurring != nil {
		v.recurring(r.Recurring)
	}
	v.chargeSource(r.PaymentSource, now)
}

// ValidateInitPayment checks a decoded POST /init-payment body (interface
// 4.1, 4.9). three_ds.mpi_data is not part of init-payment and is ignored
// like any unknown member: handlers must not read it.
func ValidateInitPayment(r *InitPaymentRequest) *apierr.Error {
	if r == nil {
		return errNotObject()
	}
	var v violations
	v.orderFields(&r.OrderFields, true)
	v.settle(r.Settle)
	if r.PaymentForm != nil && r.PaymentForm.Language != nil {
		if l := *r.PaymentForm.Language; len(l) != 2 || !isASCIILetter(l[0]) || !isASCIILetter(l[1]) {
			v.add(famGeneral, "payment_form.language", "payment_form.language should be a 2-letter language code, such as en")
		}
	}
	return v.result()
}

// ValidateWallet checks a decoded wallet payment body (interface 4.4).
// walletType is the endpoint's type, "walleta-pay" or "walletb-pay";
// payment_source.type must equal it, and payment_source is checked against
// the endpoint's shape. fail_url and success_url are not part of wallet
// payments and are ignored: handlers must not read them.
func ValidateWallet(r *WalletRequest, walletType string) *apierr.Error {
	if walletType != SourceWalletA && walletType != SourceWalletB {
		return apierr.New(apierr.Internal, "payment_source.type", "unsupported wallet endpoint")
	}
	if r == nil {
		return errNotObject()
	}
	var v violations
	v.orderFields(&r.OrderFields, false)
	v.settle(r.Settle)
	v.walletSource(r.PaymentSource, walletType)
	return v.result()
}

// ValidateSettle checks a decoded POST /settle body (interface 4.5). The
// amount is optional: without it the order settles its whole authorised
// amount (contract section 15); whether a given one fits is the order's
// 422 2.02.
func ValidateSettle(r *SettleRequest) *apierr.Error {
	if r == nil {
		return errNotObject()
	}
	var v violations
	v.orderID(r.OrderID)
	if r.Amount != nil { // none: the whole authorised amount (contract section 15)
		v.amount("amount", r.Amount)
	}
	return v.result()
}

// ValidateVoid checks a decoded POST /void body (interface 4.6). An amount,
// when given, is checked like settle's here; whether it is the order's is
// for the order to say (422 2.02).
func ValidateVoid(r *VoidRequest) *apierr.Error {
	if r == nil {
		return errNotObject()
	}
	var v violations
	v.orderID(r.OrderID)
	if r.Amount != nil {
		v.amount("amount", r.Amount)
	}
	return v.result()
}

// ValidateRefund checks a decoded POST /refund body (interface 4.7, 2.2).
func ValidateRefund(r *RefundRequest) *apierr.Error {
	if r == nil {
		return errNotObject()
	}
	var v violations
	v.orderID(r.OrderID)
	v.amount("amount", r.Amount)
	if r.RefundReasonCode != nil {
		if c := *r.RefundReasonCode; len(c) != 4 || !allDigits(c) {
			v.add(famGeneral, "refund_reason_code", "refund_reason_code should have exactly 4 digits")
		}
	}
	return v.result()
}

// ValidateStatus checks a decoded POST /status body (interface 4.8).
func ValidateStatus(r *StatusRequest) *apierr.Error {
	if r == nil {
		return errNotObject()
	}
	var v violations
	v.orderID(r.OrderID)
	return v.result()
}

// WithCallbackGuard adds guard's refusal of an order-creating request's
// callback_url to err, the request's other violations (nil if none), so that
// one 422 2.01 lists them all (contract section 3). guard is the webhook
// layer's request-time check (private targets, userinfo: rules this package
// leaves to it, see README.md); nil means no check. It judges only a
// callback_url the validator accepted: one refusal per attribute is enough.
func WithCallbackGuard(err *apierr.Error, o *OrderFields, guard func(string) error) *apierr.Error {
	if guard == nil || o.CallbackURL == nil {
		return err
	}
	if err != nil && (err.Code.HTTP != apierr.Invalid.HTTP || len(err.Messages["callback_url"]) > 0) {
		return err // not a list of field violations, or callback_url is in it already
	}
	gerr := guard(*o.CallbackURL)
	switch {
	case gerr == nil:
		return err
	case err == nil:
		return apierr.New(apierr.Invalid, "callback_url", gerr.Error())
	}
	err.Add("callback_url", gerr.Error())
	err.Code = apierr.Invalid // a mix of families (code selection, README.md)
	return err
}

// MPIVersion returns the 3-D Secure version of external MPI data: the given
// version, or "1.0.0" when it is absent or empty (interface 4.3).
func MPIVersion(m *MPIData) string {
	if m == nil || m.Version == nil || *m.Version == "" {
		return DefaultMPIVersion
	}
	return *m.Version
}

// WalletBProtocolVersion returns a walletb-pay payment_source's
// protocolVersion, or "ECv0" when it is absent or empty (interface 4.4).
func WalletBProtocolVersion(ps *PaymentSource) string {
	if ps == nil || ps.ProtocolVersion == nil || *ps.ProtocolVersion == "" {
		return DefaultWalletBProtocolVersion
	}
	return *ps.ProtocolVersion
}

// ---------------------------------------------------------------------------

// family groups violations that have a dedicated error code. A missing
// mandatory field is always famGeneral, even for currency or card fields.
type family int

const (
	famGeneral family = iota
	famCurrency
	famCVV
	famCardNumber
	famExpiry
)

// violations collects every problem of one request.
type violations struct {
	msgs  map[string][]string
	fam   family
	mixed bool
	n     int
}

func (v *violations) add(f family, attr, msg string) {
	if v.msgs == nil {
		v.msgs = make(map[string][]string)
	}
	v.msgs[attr] = append(v.msgs[attr], msg)
	if v.n == 0 {
		v.fam = f
	} else if v.fam != f {
		v.mixed = true
	}
	v.n++
}

// result picks the code: the family's own code when every violation is of
// that one family, 2.01 otherwise.
func (v *violations) result() *apierr.Error {
	if v.n == 0 {
		return nil
	}
	code := apierr.Invalid
	if !v.mixed {
		switch v.fam {
		case famCurrency:
			code = apierr.CurrencyInvalid
		case famCVV:
			code = apierr.CVVInvalid
		case famCardNumber:
			code = apierr.CardNumberInvalid
		case famExpiry:
			code = apierr.ExpiryInvalid
		}
	}
	return &apierr.Error{Code: code, Messages: v.msgs}
}

// reqString checks a mandatory string: present, not blank, at most max
// characters (max <= 0: no limit). ok reports that every check passed.
func (v *violations) reqString(attr string, p *string, max int) (string, bool) {
	if p == nil {
		v.add(famGeneral, attr, attr+" is required")
		return "", false
	}
	if strings.TrimSpace(*p) == "" {
		v.add(famGeneral, attr, attr+" must not be empty")
		return "", false
	}
	if max > 0 && utf8.RuneCountInString(*p) > max {
		v.add(famGeneral, attr, attr+" should have at most "+strconv.Itoa(max)+" characters")
		return "", false
	}
	return *p, true
}

// optString checks an optional string's length. ok reports that the value
// is present and within the limit.
func (v *violations) optString(attr string, p *string, max int) (string, bool) {
	if p == nil {
		return "", false
	}
	if utf8.RuneCountInString(*p) > max {
		v.add(famGeneral, attr, attr+" should have at most "+strconv.Itoa(max)+" characters")
		return "", false
	}
	return *p, true
}

func (v *violations) orderID(p *string) {
	s, ok := v.reqString("order_id", p, 255)
	if ok && hasControl(s) {
		v.add(famGeneral, "order_id", "order_id must not contain control characters")
	}
}

func (v *violations) amount(attr string, p *int64) {
	switch {
	case p == nil:
		v.add(famGeneral, attr, attr+" is required")
	case *p <= 0:
		v.add(famGeneral, attr, attr+" should be greater than 0")
	case *p > MaxAmount:
		v.add(famGeneral, attr, attr+" should be at most "+strconv.FormatInt(MaxAmount, 10))
	}
}

func (v *violations) currency(p *string) {
	if p == nil {
		v.add(famGeneral, "currency", "currency is required")
		return
	}
	s := *p
	if utf8.RuneCountInString(s) != 3 {
		v.add(famCurrency, "currency", "currency should have exactly 3 characters")
		return
	}
	if currency.Known(s) {
		return
	}
	if up := strings.ToUpper(s); currency.Known(up) {
		v.add(famCurrency, "currency", "currency should be an upper-case ISO-4217 code: "+up)
		return
	}
	v.add(famCurrency, "currency", "currency "+strconv.Quote(s)+" is not an ISO-4217 currency code")
}

// orderFields checks the shared order fields of interface 4.9 but settle
// (v.settle: not part of auth). redirects says whether fail_url and
// success_url belong to the operation.
func (v *violations) orderFields(o *OrderFields, redirects bool) {
	v.orderID(o.OrderID)
	v.amount("amount", o.Amount)
	v.currency(o.Currency)
	v.reqString("order_description", o.OrderDescription, 255)
	if s, ok := v.optString("order_date", o.OrderDate, 50); ok && !validDateTime(s) {
		v.add(famGeneral, "order_date", "order_date should have the format yyyy-MM-dd HH:mm:ss, such as 2024-05-31 23:59:00")
	}
	v.optString("order_items", o.OrderItems, 255)
	if o.OrderNumber != nil && *o.OrderNumber < 0 {
		v.add(famGeneral, "order_number", "order_number should be 0 or greater")
	}
	if p := o.SubscriptionProductID; p != nil {
		switch {
		case utf8.RuneCountInString(*p) != 36:
			v.add(famGeneral, "subscription_product_id", "subscription_product_id should have exactly 36 characters")
		case !validUUID(*p):
			v.add(famGeneral, "subscription_product_id", "subscription_product_id should be a UUID (8-4-4-4-12 hexadecimal digits)")
		}
	}
	v.url("callback_url", o.CallbackURL)
	if redirects {
		v.url("fail_url", o.FailURL)
		v.url("success_url", o.SuccessURL)
	}
	v.website(o.Website)
	v.reqString("processing_mid", o.ProcessingMID, 255)
	v.optString("dynamic_descriptor", o.DynamicDescriptor, 50)
	if len(o.OrderMetadata) > MaxOrderMetadata {
		v.add(famGeneral, "order_metadata", "order_metadata should have at most "+strconv.Itoa(MaxOrderMetadata)+" properties")
	}
	v.customer(o.Customer)
}

// website must name an origin: the hosted form allows framing by it alone
// (transport/server's framing policy), and one it could not read would
// leave the form frameable by any site.
func (v *violations) website(p *string) {
	s, ok := v.optString("website", p, 255)
	if !ok {
		return
	}
	if u, err := url.Parse(s); !validHTTPURL(s) || err != nil || u.User != nil || strings.ContainsAny(u.Host, ";,'\"*") {
		v.add(famGeneral, "website", "website should be an absolute http or https URL with a host, e.g. https://shop.example")
	}
}

// settle checks the mandatory settle object of interface 4.9.
func (v *violations) settle(s *Settle) {
	if s == nil {
		v.add(famGeneral, "settle", "settle is required")
		return
	}
	switch d := s.DelayHours; {
	case d == nil:
		v.add(famGeneral, "settle.delay_hours", "settle.delay_hours is required")
	case *d < 0:
		v.add(famGeneral, "settle.delay_hours", "settle.delay_hours should be 0 or greater")
	case *d > MaxSettleDelayHours:
		v.add(famGeneral, "settle.delay_hours", "settle.delay_hours should be at most "+strconv.FormatInt(MaxSettleDelayHours, 10))
	}
}

func (v *violations) url(attr string, p *string) {
	if s, ok := v.optString(attr, p, 255); ok && !validHTTPURL(s) {
		v.add(famGeneral, attr, attr+" should be an absolute http or https URL")
	}
}

func (v *violations) customer(c *Customer) {
	if c == nil {
		v.add(famGeneral, "customer", "customer is required")
		return
	}
	v.reqString("customer.user_id", c.UserID, 100)
	if s, ok := v.reqString("customer.email", c.Email, 100); ok && !validEmail(s) {
		v.add(famGeneral, "customer.email", "customer.email should be an e-mail address, such as name@example.com")
	}
	if s, ok := v.reqString("customer.ip_address", c.IPAddress, 50); ok && !validIP(s) {
		v.add(famGeneral, "customer.ip_address", "customer.ip_address should be an IPv4 or IPv6 address")
	}
	v.optString("customer.first_name", c.FirstName, 100)
	v.optString("customer.last_name", c.LastName, 100)
	v.optString("customer.phone_number", c.PhoneNumber, 50)
	if s, ok := v.optString("customer.date_of_birth", c.DateOfBirth, 50); ok && !validDate(s) {
		v.add(famGeneral, "customer.date_of_birth", "customer.date_of_birth should be a real date in the format YYYY-MM-DD")
	}
	v.country("customer.ip_country", c.IPCountry)
	if c.DeliveryAddress != nil {
		v.address("customer.delivery_address", c.DeliveryAddress)
	}
}

func (v *violations) country(attr string, p *string) {
	if p != nil && !validCountry(*p) {
		v.add(famGeneral, attr, attr+" should be a 2- or 3-letter upper-case country code, such as US or USA")
	}
}

func (v *violations) address(prefix string, a *Address) {
	v.optString(prefix+".line1", a.Line1, 100)
	v.optString(prefix+".line2", a.Line2, 100)
	v.optString(prefix+".city", a.City, 100)
	v.optString(prefix+".state", a.State, 100)
	v.optString(prefix+".zip", a.Zip, 10)
	v.country(prefix+".country", a.Country)
}

func (v *violations) recurring(r *Recurring) {
	if r.Type != nil {
		switch *r.Type {
		case "1-click", "recurring", "installment", "retry":
		default:
			v.add(famGeneral, "recurring.type", "recurring.type should be one of 1-click, recurring, installment, retry")
		}
	}
	if r.RetryAttempt != nil && *r.RetryAttempt < 0 {
		v.add(famGeneral, "recurring.retry_attempt", "recurring.retry_attempt should be 0 or greater")
	}
}

func (v *violations) mpiData(m *MPIData, ps *PaymentSource) {
	const p = "three_ds.mpi_data."
	if s, ok := v.reqString(p+"cavv", m.CAVV, 50); ok && !validBase64(s) {
		v.add(famGeneral, p+"cavv", p+"cavv should be base64-encoded")
	}
	if s, ok := v.reqString(p+"eci", m.ECI, 2); ok && !allDigits(s) {
		v.add(famGeneral, p+"eci", p+"eci should have 1 or 2 digits")
	}
	major := 1 // version defaults to 1.0.0
	if s, ok := v.optString(p+"version", m.Version, 10); ok {
		if major, ok = order.ThreeDSMajor(s); !ok {
			v.add(famGeneral, p+"version", p+"version should be a 3-D Secure version such as 1.0.2 or 2.2.0")
		}
	} else if m.Version != nil {
		major = 0 // too long: no xid rule
	}
	xid, xidOK := v.optString(p+"xid", m.XID, 50)
	if m.XID == nil || (xidOK && strings.TrimSpace(xid) == "") {
		// A token's card is not known here: order.CheckTokenCard applies the
		// Mastercard rule once the token resolves.
		pan := ""
		if ps != nil && ps.Type != nil && *ps.Type == SourceCard && ps.CardNumber != nil {
			pan = *ps.CardNumber
		}
		v.xidRequired(major, pan)
	}
	v.optString(p+"ds_transaction_id", m.DSTransactionID, 50)
}

// xidRequired refuses a missing three_ds.mpi_data.xid where interface 4.3
// requires it (order.XIDProblem): 3-D Secure 1.x.x with any card, 2.x.x
// with a Mastercard card.
func (v *violations) xidRequired(major int, pan string) {
	const attr = "three_ds.mpi_data.xid"
	if why := order.XIDProblem(major, pan); why != "" {
		v.add(famGeneral, attr, attr+" "+why)
	}
}

// chargeSource checks payment_source of a charge: card or token.
func (v *violations) chargeSource(ps *PaymentSource, now time.Time) {
	if ps == nil {
		v.add(famGeneral, "payment_source", "payment_source is required")
		return
	}
	if ps.Type == nil {
		v.add(famGeneral, "payment_source.type", "payment_source.type is required")
	} else {
		switch t := *ps.Type; t {
		case SourceCard:
			v.card(ps, now)
		case SourceToken:
			v.reqString("payment_source.payment_token", ps.PaymentToken, 255)
			v.cvv(ps.CardCVV, "", false)
		case SourceWalletA, SourceWalletB:
			v.add(famGeneral, "payment_source.type", "payment_source.type "+t+" is not accepted by charge: use the "+t+" endpoint")
		default:
			v.add(famGeneral, "payment_source.type", "payment_source.type should be card or token")
		}
	}
	if ps.BillingAddress != nil {
		v.address("payment_source.billing_address", ps.BillingAddress)
	}
}

func (v *violations) card(ps *PaymentSource, now time.Time) {
	const p = "payment_source."
	pan, panKnown := "", false
	if ps.CardNumber == nil {
		v.add(famGeneral, p+"card_number", p+"card_number is required")
	} else {
		s := *ps.CardNumber
		switch {
		case s == "":
			v.add(famGeneral, p+"card_number", p+"card_number must not be empty")
		case !allDigits(s):
			v.add(famCardNumber, p+"card_number", p+"card_number should contain digits only, without spaces or separators")
		case len(s) < 12 || len(s) > 19:
			v.add(famCardNumber, p+"card_number", p+"card_number should have 12 to 19 digits")
			pan, panKnown = s, true
		case !card.Luhn(s):
			v.add(famCardNumber, p+"card_number", p+"card_number is not a valid card number (Luhn check failed)")
			pan, panKnown = s, true
		case strings.Trim(s, "0") == "":
			// Its Luhn sum is 0: valid by the checksum, issued by nobody.
			v.add(famCardNumber, p+"card_number", p+"card_number is not a valid card number")
			pan, panKnown = s, true
		default:
			pan, panKnown = s, true
		}
	}
	v.reqString(p+"card_holder_name", ps.CardHolderName, 32)

	month, monthOK := 0, false
	if ps.CardExpMonth == nil {
		v.add(famGeneral, p+"card_exp_month", p+"card_exp_month is required")
	} else if month, monthOK = card.ExpiryMonth(*ps.CardExpMonth); !monthOK {
		v.add(famExpiry, p+"card_exp_month", p+"card_exp_month should be a month from 01 to 12")
	}
	year, yearOK := 0, false
	if ps.CardExpYear == nil {
		v.add(famGeneral, p+"card_exp_year", p+"card_exp_year is required")
	} else if year, yearOK = card.ExpiryYear(*ps.CardExpYear); !yearOK {
		v.add(famExpiry, p+"card_exp_year", p+"card_exp_year should be a year of 4 digits, such as 2030")
	}
	if monthOK && yearOK && card.Expired(month, year, now) {
		v.add(famExpiry, p+"card_exp_year", p+"card_exp_month and "+p+"card_exp_year are in the past: the card expired at the end of "+
			twoDigits(month)+"/"+fmt.Sprintf("%04d", year))
	}
	v.cvv(ps.CardCVV, pan, panKnown)
}

// cvv checks an optional card_cvv against the card's brand
// (card.CVVProblem): panKnown false when the number is not valid.
func (v *violations) cvv(p *string, pan string, panKnown bool) {
	if p == nil {
		return
	}
	const attr = "payment_source.card_cvv"
	if why := card.CVVProblem(*p, pan, panKnown); why != "" {
		v.add(famCVV, attr, attr+" "+why)
	}
}

// walletSource checks payment_source against the wallet endpoint's shape.
func (v *violations) walletSource(ps *PaymentSource, walletType string) {
	const p = "payment_source."
	if ps == nil {
		v.add(famGeneral, "payment_source", "payment_source is required")
		return
	}
	if ps.Type == nil {
		v.add(famGeneral, p+"type", p+"type is required")
	} else if *ps.Type != walletType {
		v.add(famGeneral, p+"type", p+"type should be "+walletType+" on this endpoint")
	}
	v.reqString(p+"signature", ps.Signature, 0)
	if walletType == SourceWalletB {
		v.reqString(p+"signedMessage", ps.SignedMessage, 0)
		if ps.ProtocolVersion != nil {
			switch *ps.ProtocolVersion {
			case "ECv0", "ECv1", "ECv2":
			default:
				v.add(famGeneral, p+"protocolVersion", p+"protocolVersion should be ECv0, ECv1 or ECv2")
			}
		}
		v.intermediateSigningKey(ps)
		return
	}
	version, versionOK := v.reqString(p+"version", ps.Version, 0)
	if versionOK && version != "EC_v1" && version != "RSA_v1" {
		v.add(famGeneral, p+"version", p+"version should be EC_v1 or RSA_v1")
	}
	v.reqString(p+"data", ps.Data, 0)
	if ps.Header == nil {
		v.add(famGeneral, p+"header", p+"header is required")
		return
	}
	h := ps.Header
	v.reqString(p+"header.transactionId", h.TransactionID, 0)
	v.reqString(p+"header.publicKeyHash", h.PublicKeyHash, 0)
	switch version {
	case "RSA_v1":
		if h.WrappedKey == nil || strings.TrimSpace(*h.WrappedKey) == "" {
			v.add(famGeneral, p+"header.wrappedKey", p+"header.wrappedKey is required when "+p+"version is RSA_v1")
		}
	case "EC_v1":
		if h.EphemeralPublicKey == nil || strings.TrimSpace(*h.EphemeralPublicKey) == "" {
			v.add(famGeneral, p+"header.ephemeralPublicKey", p+"header.ephemeralPublicKey is required when "+p+"version is EC_v1")
		}
	}
}

// intermediateSigningKey checks walletb-pay's intermediateSigningKey by shape
// only: required for ECv2 (which cannot be verified without it), otherwise
// optional; when present, a non-blank signedKey and at least one non-blank
// signature. Its cryptography is the wallet package's job.
func (v *violations) intermediateSigningKey(ps *PaymentSource) {
	const attr = "payment_source.intermediateSigningKey"
	isk := ps.IntermediateSigningKey
	if isk == nil {
		if ps.ProtocolVersion != nil && *ps.ProtocolVersion == "ECv2" {
			v.add(famGeneral, attr, attr+" is required when payment_source.protocolVersion is ECv2")
		}
		return
	}
	v.reqString(attr+".signedKey", isk.SignedKey, 0)
	if len(isk.Signatures) == 0 {
		v.add(famGeneral, attr+".signatures", attr+".signatures should have at least one signature")
	}
	for _, sig := range isk.Signatures {
		if strings.TrimSpace(sig) == "" {
			v.add(famGeneral, attr+".signatures", attr+".signatures must not contain an empty signature")
			break
		}
	}
}

// ---------------------------------------------------------------------------
// Formats.

func isASCIILetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

func twoDigits(n int) string {
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return true
		}
	}
	return false
}

// validDate accepts exactly YYYY-MM-DD naming a real calendar date.
func validDate(s string) bool {
	if len(s) != 10 || !fixedDigits(s, "dddd-dd-dd") {
		return false
	}
	_, err := time.Parse(time.DateOnly, s)
	return err == nil
}

// validDateTime accepts exactly yyyy-MM-dd HH:mm:ss naming a real instant.
func validDateTime(s string) bool {
	if len(s) != 19 || !fixedDigits(s, "dddd-dd-dd dd:dd:dd") {
		return false
	}
	_, err := time.Parse(time.DateTime, s)
	return err == nil
}

// fixedDigits matches s against a pattern where 'd' is an ASCII digit and
// every other byte must match itself.
func fixedDigits(s, pattern string) bool {
	if len(s) != len(pattern) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if pattern[i] == 'd' {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		} else if s[i] != pattern[i] {
			return false
		}
	}
	return true
}

// validUUID accepts the 36-character 8-4-4-4-12 hexadecimal form, any
// version, either letter case.
func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// validHTTPURL accepts an absolute http or https URL with a host and no
// whitespace or control characters.
func validHTTPURL(s string) bool {
	for _, r := range s {
		if r <= 0x20 || r == 0x7f {
			return false
		}
	}
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" {
		return false
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return false
	}
	if u.Hostname() == "" {
		return false
	}
	if port := u.Port(); port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return false
		}
	}
	return true
}

// validEmail accepts local@domain: an unquoted local part of at most 64
// characters without spaces or the specials ()<>[]:;,\" and without
// leading, trailing or doubled dots; a domain of at least two dot-separated
// labels of letters, digits and inner hyphens (non-ASCII letters allowed).
func validEmail(s string) bool {
	at := strings.IndexByte(s, '@')
	if at <= 0 || at != strings.LastIndexByte(s, '@') || at == len(s)-1 {
		return false
	}
	local, domain := s[:at], s[at+1:]
	if utf8.RuneCountInString(local) > 64 || local[0] == '.' || local[len(local)-1] == '.' || strings.Contains(local, "..") {
		return false
	}
	for _, r := range local {
		if r <= 0x20 || r == 0x7f || strings.ContainsRune(`()<>[]:;,\"`, r) {
			return false
		}
	}
	labels, last := 0, "" // counted as they go by: no slice of them per request
	for l := range strings.SplitSeq(domain, ".") {
		labels, last = labels+1, l
		if l == "" || utf8.RuneCountInString(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			ok := r == '-' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') ||
				(r >= 0xa0 && r != utf8.RuneError)
			if !ok {
				return false
			}
		}
	}
	return labels >= 2 && !allDigits(last)
}

// validIP accepts a textual IPv4 or IPv6 address without a zone.
func validIP(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Zone() == ""
}

// validCountry accepts 2 or 3 upper-case ASCII letters (ISO-3166 alpha-2 or
// alpha-3 shape; the list itself is not checked).
func validCountry(s string) bool {
	if len(s) != 2 && len(s) != 3 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

// validBase64 accepts standard base64, padded or not.
func validBase64(s string) bool {
	if _, err := base64.StdEncoding.DecodeString(s); err == nil {
		return true
	}
	_, err := base64.RawStdEncoding.DecodeString(s)
	return err == nil
}

// allDigits reports whether s is non-empty and only ASCII digits.
func allDigits(s string) bool { return card.Digits(s) }
