package org.esbridge.analysis;

import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.ngram.EdgeNGramTokenFilter;
import org.elasticsearch.plugin.Inject;
import org.elasticsearch.plugin.NamedComponent;
import org.elasticsearch.plugin.analysis.TokenFilterFactory;
import org.elasticsearch.plugin.settings.AnalysisSettings;
import org.elasticsearch.plugin.settings.BooleanSetting;
import org.elasticsearch.plugin.settings.IntSetting;

/** analysis-common {@code edge_ngram} token filter (front side only). */
@NamedComponent("edge_ngram")
public class EdgeNGramTokenFilterFactory implements TokenFilterFactory {
    @AnalysisSettings
    public interface Settings {
        @IntSetting(path = "min_gram", defaultValue = 1) int minGram();
        @IntSetting(path = "max_gram", defaultValue = 2) int maxGram();
        @BooleanSetting(path = "preserve_original", defaultValue = false) boolean preserveOriginal();
    }

    private final int minGram, maxGram;
    private final boolean preserveOriginal;

    @Inject
    public EdgeNGramTokenFilterFactory(Settings settings) {
        this.minGram = settings.minGram();
        this.maxGram = settings.maxGram();
        this.preserveOriginal = settings.preserveOriginal();
    }

    @Override
    public TokenStream create(TokenStream in) {
        return new EdgeNGramTokenFilter(in, minGram, maxGram, preserveOriginal);
    }
}
