package i18n

import "context"

// pluralOne says, per language, whether a count takes the singular form.
// English inflects exactly one ("1 day", "2 days"); Indonesian does not
// inflect for number ("1 hari", "2 hari"), so its catalog has no singular
// forms at all.
var pluralOne = map[string]func(n int64) bool{
	EN: func(n int64) bool { return n == 1 },
	ID: func(int64) bool { return false },
}

// PluralSuffix is the suffix of a key's singular form: "rel.days" is
// "%d days ago" and "rel.days.one" is "%d day ago".
const PluralSuffix = ".one"

// Plural is T for a sentence about n things: it formats the key's
// singular form (key + PluralSuffix) where the language's rule asks for
// one, else key itself. n only picks the form; args are the format's
// arguments (n among them where the sentence prints it).
func Plural(ctx context.Context, key string, n int64, args ...any) string {
	return PluralIn(Lang(ctx), key, n, args...)
}

// PluralIn is Plural for an explicit language.
func PluralIn(lang, key string, n int64, args ...any) string {
	if one, ok := pluralOne[lang]; ok && one(n) && Has(key+PluralSuffix) {
		key += PluralSuffix
	}
	return In(lang, key, args...)
}

// Count is Plural for a sentence whose only argument is the count.
func Count(ctx context.Context, key string, n int64) string { return Plural(ctx, key, n, n) }

// HasSingular reports whether lang has singular forms (PluralSuffix keys).
func HasSingular(lang string) bool { return lang != ID }
