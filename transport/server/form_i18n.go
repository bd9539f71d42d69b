package server

import "strings"

// The pages' languages (contract section 9a: at least en, de, fr, es). A
// missing or unknown payment_form.language falls back to English.

const defaultLanguage = "en"

// pageTexts holds every text of the form, issuer and result pages, per
// language. Keys starting "js_" are the texts the script needs.
var pageTexts = map[string]map[string]string{
	"en": {
		"noscript":         "JavaScript is needed to pay on this page.",
		"title_pay":        "Payment",
		"order":            "Order",
		"amount":           "Amount to pay",
		"card_number":      "Card number",
		"card_number_hint": "Digits only; spaces are ignored.",
		"card_holder":      "Name on card",
		"expiry":           "Expiry date",
		"exp_month":        "Month (MM)",
		"exp_year":         "Year (YYYY)",
		"cvv":              "Security code (CVV)",
		"cvv_hint":         "3 digits on the back of the card, 4 on the front for American Express.",
		"pay":              "Pay %s",
		"secure_note":      "Your card details go only to the payment gateway, over this page's own connection.",
		"expired_title":    "This payment form has expired",
		"expired_text":     "It can no longer be paid. Please return to the shop and start again.",
		"not_found_title":  "Payment link not valid",
		"not_found_text":   "There is no payment at this address. Please check the link or return to the shop.",
		"error_title":      "Something went wrong",
		"issuer_title":     "Verify your payment",
		"issuer_sandbox":   "Sandbox issuer: this test page stands for your bank's 3-D Secure check. Choose the outcome of the authentication.",
		"merchant":         "Merchant",
		"card":             "Card",
		"issuer_success":   "Authenticate",
		"issuer_failure":   "Fail authentication",
		"result_title":     "Payment result",
		"js_processing":    "Processing your payment…",
		"js_success":       "Payment successful",
		"js_declined":      "Payment declined",
		"js_expired":       "This payment form has expired",
		"js_used":          "This payment form can no longer be paid.",
		"js_redirecting":   "Taking you back to the shop…",
		"js_to_bank":       "Taking you to your bank for verification…",
		"js_required":      "Please fill in this field.",
		"js_number":        "Please check the card number: it is not a valid card number.",
		"js_month":         "Enter a month from 01 to 12.",
		"js_year":          "Enter the year with 4 digits, such as 2030.",
		"js_card_expired":  "This card has expired.",
		"js_cvv3":          "Enter the 3-digit security code.",
		"js_cvv4":          "Enter the 4-digit security code.",
		"js_fix":           "Please correct the fields marked with an error.",
		"js_failed":        "The payment could not be sent. Please try again.",
		"js_continue":      "Continue",
	},
	"de": {
		"noscript":         "Zum Bezahlen auf dieser Seite wird JavaScript benötigt.",
		"title_pay":        "Zahlung",
		"order":            "Bestellung",
		"amount":           "Zu zahlender Betrag",
		"card_number":      "Kartennummer",
		"card_number_hint": "Nur Ziffern; Leerzeichen werden ignoriert.",
		"card_holder":      "Name auf der Karte",
		"expiry":           "Ablaufdatum",
		"exp_month":        "Monat (MM)",
		"exp_year":         "Jahr (JJJJ)",
		"cvv":              "Prüfnummer (CVV)",
		"cvv_hint":         "3 Ziffern auf der Kartenrückseite, 4 auf der Vorderseite bei American Express.",
		"pay":              "%s bezahlen",
		"secure_note":      "Ihre Kartendaten gehen nur an das Zahlungs-Gateway, über die Verbindung dieser Seite.",
		"expired_title":    "Dieses Zahlungsformular ist abgelaufen",
		"expired_text":     "Es kann nicht mehr bezahlt werden. Bitte kehren Sie zum Shop zurück und beginnen Sie erneut.",
		"not_found_title":  "Zahlungslink ungültig",
		"not_found_text":   "Unter dieser Adresse gibt es keine Zahlung. Bitte prüfen Sie den Link oder kehren Sie zum Shop zurück.",
		"error_title":      "Etwas ist schiefgelaufen",
		"issuer_title":     "Zahlung bestätigen",
		"issuer_sandbox":   "Sandbox-Kartenherausgeber: Diese Testseite steht für die 3-D-Secure-Prüfung Ihrer Bank. Wählen Sie das Ergebnis der Authentifizierung.",
		"merchant":         "Händler",
		"card":             "Karte",
		"issuer_success":   "Authentifizieren",
		"issuer_failure":   "Authentifizierung ablehnen",
		"result_title":     "Zahlungsergebnis",
		"js_processing":    "Ihre Zahlung wird verarbeitet…",
		"js_success":       "Zahlung erfolgreich",
		"js_declined":      "Zahlung abgelehnt",
		"js_expired":       "Dieses Zahlungsformular ist abgelaufen",
		"js_used":          "Dieses Zahlungsformular kann nicht mehr bezahlt werden.",
		"js_redirecting":   "Sie werden zum Shop zurückgeleitet…",
		"js_to_bank":       "Sie werden zur Bestätigung zu Ihrer Bank weitergeleitet…",
		"js_required":      "Bitte füllen Sie dieses Feld aus.",
		"js_number":        "Bitte prüfen Sie die Kartennummer: Sie ist keine gültige Kartennummer.",
		"js_month":         "Geben Sie einen Monat von 01 bis 12 ein.",
		"js_year":          "Geben Sie das Jahr vierstellig ein, z. B. 2030.",
		"js_card_expired":  "Diese Karte ist abgelaufen.",
		"js_cvv3":          "Geben Sie die 3-stellige Prüfnummer ein.",
		"js_cvv4":          "Geben Sie die 4-stellige Prüfnummer ein.",
		"js_fix":           "Bitte korrigieren Sie die als fehlerhaft markierten Felder.",
		"js_failed":        "Die Zahlung konnte nicht gesendet werden. Bitte versuchen Sie es erneut.",
		"js_continue":      "Weiter",
	},
	"fr": {
		"noscript":         "JavaScript est nécessaire pour payer sur cette page.",
		"title_pay":        "Paiement",
		"order":            "Commande",
		"amount":           "Montant à payer",
		"card_number":      "Numéro de carte",
		"card_number_hint": "Chiffres uniquement ; les espaces sont ignorés.",
		"card_holder":      "Nom sur la carte",
		"expiry":           "Date d'expiration",
		"exp_month":        "Mois (MM)",
		"exp_year":         "Année (AAAA)",
		"cvv":              "Cryptogramme visuel (CVV)",
		"cvv_hint":         "3 chiffres au dos de la carte, 4 au recto pour American Express.",
		"pay":              "Payer %s",
		"secure_note":      "Vos données de carte ne vont qu'à la passerelle de paiement, par la connexion de cette page.",
		"expired_title":    "Ce formulaire de paiement a expiré",
		"expired_text":     "Il ne peut plus être payé. Veuillez retourner sur la boutique et recommencer.",
		"not_found_title":  "Lien de paiement non valide",
		"not_found_text":   "Il n'y a pas de paiement à cette adresse. Veuillez vérifier le lien ou retourner sur la boutique.",
		"error_title":      "Une erreur s'est produite",
		"issuer_title":     "Vérifiez votre paiement",
		"issuer_sandbox":   "Émetteur de test : cette page tient lieu du contrôle 3-D Secure de votre banque. Choisissez le résultat de l'authentification.",
		"merchant":         "Marchand",
		"card":             "Carte",
		"issuer_success":   "Authentifier",
		"issuer_failure":   "Échouer l'authentification",
		"result_title":     "Résultat du paiement",
		"js_processing":    "Traitement de votre paiement…",
		"js_success":       "Paiement réussi",
		"js_declined":      "Paiement refusé",
		"js_expired":       "Ce formulaire de paiement a expiré",
		"js_used":          "Ce formulaire de paiement ne peut plus être payé.",
		"js_redirecting":   "Retour vers la boutique…",
		"js_to_bank":       "Redirection vers votre banque pour vérification…",
		"js_required":      "Veuillez remplir ce champ.",
		"js_number":        "Veuillez vérifier le numéro de carte : il n'est pas valide.",
		"js_month":         "Saisissez un mois de 01 à 12.",
		"js_year":          "Saisissez l'année sur 4 chiffres, par exemple 2030.",
		"js_card_expired":  "Cette carte a expiré.",
		"js_cvv3":          "Saisissez le code de sécurité à 3 chiffres.",
		"js_cvv4":          "Saisissez le code de sécurité à 4 chiffres.",
		"js_fix":           "Veuillez corriger les champs signalés en erreur.",
		"js_failed":        "Le paiement n'a pas pu être envoyé. Veuillez réessayer.",
		"js_continue":      "Continuer",
	},
	"es": {
		"noscript":         "Se necesita JavaScript para pagar en esta página.",
		"title_pay":        "Pago",
		"order":            "Pedido",
		"amount":           "Importe a pagar",
		"card_number":      "Número de tarjeta",
		"card_number_hint": "Solo dígitos; los espacios se ignoran.",
		"card_holder":      "Nombre en la tarjeta",
		"expiry":           "Fecha de caducidad",
		"exp_month":        "Mes (MM)",
		"exp_year":         "Año (AAAA)",
		"cvv":              "Código de seguridad (CVV)",
		"cvv_hint":         "3 dígitos en el reverso de la tarjeta, 4 en el anverso para American Express.",
		"pay":              "Pagar %s",
		"secure_note":      "Los datos de su tarjeta solo van a la pasarela de pago, por la conexión de esta página.",
		"expired_title":    "Este formulario de pago ha caducado",
		"expired_text":     "Ya no se puede pagar. Vuelva a la tienda y empiece de nuevo.",
		"not_found_title":  "Enlace de pago no válido",
		"not_found_text":   "No hay ningún pago en esta dirección. Compruebe el enlace o vuelva a la tienda.",
		"error_title":      "Algo ha salido mal",
		"issuer_title":     "Verifique su pago",
		"issuer_sandbox":   "Emisor de pruebas: esta página hace las veces de la comprobación 3-D Secure de su banco. Elija el resultado de la autenticación.",
		"merchant":         "Comercio",
		"card":             "Tarjeta",
		"issuer_success":   "Autenticar",
		"issuer_failure":   "Rechazar la autenticación",
		"result_title":     "Resultado del pago",
		"js_processing":    "Procesando su pago…",
		"js_success":       "Pago realizado",
		"js_declined":      "Pago rechazado",
		"js_expired":       "Este formulario de pago ha caducado",
		"js_used":          "Este formulario de pago ya no se puede pagar.",
		"js_redirecting":   "Volviendo a la tienda…",
		"js_to_bank":       "Le llevamos a su banco para la verificación…",
		"js_required":      "Rellene este campo.",
		"js_number":        "Compruebe el número de tarjeta: no es un número válido.",
		"js_month":         "Introduzca un mes del 01 al 12.",
		"js_year":          "Introduzca el año con 4 dígitos, por ejemplo 2030.",
		"js_card_expired":  "Esta tarjeta ha caducado.",
		"js_cvv3":          "Introduzca el código de seguridad de 3 dígitos.",
		"js_cvv4":          "Introduzca el código de seguridad de 4 dígitos.",
		"js_fix":           "Corrija los campos marcados con un error.",
		"js_failed":        "No se pudo enviar el pago. Inténtelo de nuevo.",
		"js_continue":      "Continuar",
	},
}

// pageLanguage returns a supported language for a requested code.
func pageLanguage(code string) string {
	code = strings.ToLower(code)
	if _, ok := pageTexts[code]; ok {
		return code
	}
	return defaultLanguage
}

// scriptTexts are the js_ texts of a language, keyed without the prefix.
func scriptTexts(lang string) map[string]string {
	out := map[string]string{}
	for k, v := range pageTexts[lang] {
		if name, ok := strings.CutPrefix(k, "js_"); ok {
			out[name] = v
		}
	}
	return out
}

// numberFormat is a language's decimal and grouping separators.
var numberFormat = map[string][2]string{
	"en": {".", ","},
	"de": {",", "."},
	"fr": {",", "\u202f"}, // narrow no-break space
	"es": {",", "."},
}

// formatAmount renders an amount in minor units for people: the currency's
// minor-unit exponent (currency.Currency.Exponent) places the decimal separator,
// the language picks the separators, and the ISO code follows:
// 102050 USD → "1,020.50 USD" (en), "1.020,50 USD" (de); 500 JPY → "500 JPY".
func formatAmount(amount int64, currency string, exp int, lang string) string {
	sep := numberFormat[lang]
	if sep[0] == "" {
		sep = numberFormat[defaultLanguage]
	}
	neg := amount < 0
	if neg {
		amount = -amount
	}
	digits := []byte(itoa(amount))
	for len(digits) <= exp {
		digits = append([]byte{'0'}, digits...)
	}
	whole, frac := string(digits[:len(digits)-exp]), string(digits[len(digits)-exp:])
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteString(sep[1])
		}
		b.WriteRune(c)
	}
	if exp > 0 {
		b.WriteString(sep[0])
		b.WriteString(frac)
	}
	b.WriteString("\u00a0")
	b.WriteString(currency)
	return b.String()
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var buf [20]byte
	i := len(buf)
	for n > 0 {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return string(buf[i:])
}
