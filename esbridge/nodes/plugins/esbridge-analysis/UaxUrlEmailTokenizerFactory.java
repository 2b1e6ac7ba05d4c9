package org.esbridge.analysis;

import org.apache.lucene.analysis.Tokenizer;
import org.apache.lucene.analysis.email.UAX29URLEmailTokenizer;
import org.elasticsearch.plugin.Inject;
import org.elasticsearch.plugin.NamedComponent;
import org.elasticsearch.plugin.analysis.TokenizerFactory;
import org.elasticsearch.plugin.settings.AnalysisSettings;
import org.elasticsearch.plugin.settings.IntSetting;

/** analysis-common {@code uax_url_email} tokenizer (used by the .security index's email analyzer). */
@NamedComponent("uax_url_email")
public class UaxUrlEmailTokenizerFactory implements TokenizerFactory {
    @AnalysisSettings
    public interface Settings {
        @IntSetting(path = "max_token_length", defaultValue = 255) int maxTokenLength();
    }

    private final int maxTokenLength;

    @Inject
    public UaxUrlEmailTokenizerFactory(Settings settings) {
        this.maxTokenLength = settings.maxTokenLength();
    }

    @Override
    public Tokenizer create() {
        UAX29URLEmailTokenizer t = new UAX29URLEmailTokenizer();
        t.setMaxTokenLength(maxTokenLength);
        return t;
    }
}
