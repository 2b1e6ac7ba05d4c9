package org.esbridge.analysis;

import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.en.EnglishMinimalStemFilter;
import org.apache.lucene.analysis.en.EnglishPossessiveFilter;
import org.apache.lucene.analysis.en.KStemFilter;
import org.apache.lucene.analysis.en.PorterStemFilter;
import org.apache.lucene.analysis.snowball.SnowballFilter;
import org.elasticsearch.plugin.Inject;
import org.elasticsearch.plugin.NamedComponent;
import org.elasticsearch.plugin.analysis.TokenFilterFactory;
import org.elasticsearch.plugin.settings.AnalysisSettings;
import org.elasticsearch.plugin.settings.StringSetting;

import java.util.Locale;
import java.util.function.UnaryOperator;

/** analysis-common {@code stemmer}, English languages only ({@code language} or its alias {@code name}). */
@NamedComponent("stemmer")
public class StemmerTokenFilterFactory implements TokenFilterFactory {
    @AnalysisSettings
    public interface Settings {
        @StringSetting(path = "language", defaultValue = "")
        String language();

        @StringSetting(path = "name", defaultValue = "")
        String name();
    }

    private final UnaryOperator<TokenStream> stemmer;

    @Inject
    public StemmerTokenFilterFactory(Settings settings) {
        String lang = settings.language().isEmpty() ? settings.name() : settings.language();
        if (lang.isEmpty()) lang = "porter";
        switch (lang.toLowerCase(Locale.ROOT)) {
            case "english", "porter" -> stemmer = PorterStemFilter::new;
            case "porter2" -> stemmer = in -> new SnowballFilter(in, new org.tartarus.snowball.ext.EnglishStemmer());
            case "light_english", "lightenglish", "kstem" -> stemmer = KStemFilter::new;
            case "minimal_english", "minimalenglish" -> stemmer = EnglishMinimalStemFilter::new;
            case "possessive_english", "possessiveenglish" -> stemmer = EnglishPossessiveFilter::new;
            default -> throw new IllegalArgumentException("stemmer language [" + lang + "] is not supported by esbridge-analysis");
        }
    }

    @Override
    public TokenStream create(TokenStream in) {
        return stemmer.apply(in);
    }
}
