package org.esbridge.analysis;

import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.Tokenizer;
import org.apache.lucene.analysis.core.WhitespaceTokenizer;
import org.elasticsearch.plugin.Inject;
import org.elasticsearch.plugin.NamedComponent;
import org.elasticsearch.plugin.analysis.TokenizerFactory;
import org.elasticsearch.plugin.settings.AnalysisSettings;
import org.elasticsearch.plugin.settings.IntSetting;

/** analysis-common {@code whitespace} tokenizer. */
@NamedComponent("whitespace")
public class WhitespaceTokenizerFactory implements TokenizerFactory {
    @AnalysisSettings
    public interface Settings {
        @IntSetting(path = "max_token_length", defaultValue = 255) int maxTokenLength();
    }

    private final int maxTokenLength;

    @Inject
    public WhitespaceTokenizerFactory(Settings settings) {
        this.maxTokenLength = settings.maxTokenLength();
    }

    @Override
    public Tokenizer create() {
        return new WhitespaceTokenizer(TokenStream.DEFAULT_TOKEN_ATTRIBUTE_FACTORY, maxTokenLength);
    }
}
