package org.esbridge.analysis;

import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.miscellaneous.ASCIIFoldingFilter;
import org.elasticsearch.plugin.Inject;
import org.elasticsearch.plugin.NamedComponent;
import org.elasticsearch.plugin.analysis.TokenFilterFactory;
import org.elasticsearch.plugin.settings.AnalysisSettings;
import org.elasticsearch.plugin.settings.BooleanSetting;

/** analysis-common {@code asciifolding}. */
@NamedComponent("asciifolding")
public class AsciiFoldingTokenFilterFactory implements TokenFilterFactory {
    @AnalysisSettings
    public interface Settings {
        @BooleanSetting(path = "preserve_original", defaultValue = false) boolean preserveOriginal();
    }

    private final boolean preserveOriginal;

    @Inject
    public AsciiFoldingTokenFilterFactory(Settings settings) {
        this.preserveOriginal = settings.preserveOriginal();
    }

    @Override
    public TokenStream create(TokenStream in) {
        return new ASCIIFoldingFilter(in, preserveOriginal);
    }

    @Override
    public TokenStream normalize(TokenStream in) {
        return new ASCIIFoldingFilter(in, false);
    }
}
